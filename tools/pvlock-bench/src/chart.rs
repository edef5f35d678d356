// SPDX-License-Identifier: GPL-2.0

//! The charts: for one workload, a bar per mode and overcommit level (the
//! median over repetitions, a whisker from min to max), on a log scale
//! since native and PV differ by orders of magnitude. Pure-Rust SVG: the
//! text is written as `<text>` elements, no font file is read.

use crate::matrix::{Mode, Overcommit, Workload};
use crate::stats::Summary;
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// One per mode, in the order of [`Mode::ALL`].
const COLORS: [RGBColor; Mode::ALL.len()] = [
    RGBColor(0x99, 0x99, 0x99),
    RGBColor(0xcc, 0xcc, 0xcc),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    // pvlock-static: pvlock-hostkvm's green, lighter.
    RGBColor(0x98, 0xdf, 0x8a),
    // pvlock-nohint: pvlock-hostkvm's green, darker.
    RGBColor(0x1a, 0x5e, 0x1a),
];

fn color(m: Mode) -> RGBColor {
    COLORS[Mode::ALL.iter().position(|x| *x == m).unwrap_or(0)]
}

/// Draws workload `w` of `s` into the SVG file `path`.
pub fn chart(s: &Summary, w: Workload, title: &str, path: &Path) -> Result<()> {
    let ocs: Vec<Overcommit> = Overcommit::ALL
        .into_iter()
        .filter(|oc| Mode::ALL.iter().any(|m| s.cell(*oc, w, *m).is_some()))
        .collect();
    let values: Vec<f64> = s
        .cells
        .iter()
        .filter(|c| c.key.workload == w)
        .filter_map(|c| c.value)
        .flat_map(|a| [a.min, a.max])
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = if values.is_empty() {
        (1.0, 10.0)
    } else {
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)),
        )
    };
    let err = |e: &dyn std::fmt::Display| anyhow!("chart {}: {e}", path.display());
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let n = ocs.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n, (lo..hi).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(w.unit())
        .y_label_formatter(&|v| pvlock_common::fmt::fmt_num(*v))
        .draw()
        .map_err(|e| err(&e))?;
    if values.is_empty() {
        root.draw(&Text::new(
            "no measurement",
            (420, 260),
            ("sans-serif", 20).into_font().color(&BLACK),
        ))
        .map_err(|e| err(&e))?;
    }
    // The modes of this workload (native-2vcpu has only the contended
    // workload at 2x), each its slot in every group of bars.
    let modes: Vec<Mode> = Mode::ALL
        .into_iter()
        .filter(|m| ocs.iter().any(|oc| s.cell(*oc, w, *m).is_some()))
        .collect();
    let slot = 0.8 / modes.len().max(1) as f64;
    for (k, m) in modes.into_iter().enumerate() {
        let c = color(m);
        let mut bars = Vec::new();
        let mut whiskers = Vec::new();
        for (i, oc) in ocs.iter().enumerate() {
            let Some(a) = s.cell(*oc, w, m).and_then(|c| c.value) else {
                continue;
            };
            let x0 = i as f64 + 0.1 + k as f64 * slot;
            let x1 = x0 + slot * 0.9;
            bars.push(Rectangle::new(
                [(x0, lo), (x1, a.median.max(lo))],
                c.filled(),
            ));
            let xm = (x0 + x1) / 2.0;
            whiskers.push(PathElement::new(
                vec![(xm, a.min.max(lo)), (xm, a.max.max(lo))],
                BLACK.stroke_width(1),
            ));
            whiskers.push(PathElement::new(
                vec![
                    (xm - slot * 0.2, a.max.max(lo)),
                    (xm + slot * 0.2, a.max.max(lo)),
                ],
                BLACK.stroke_width(1),
            ));
            whiskers.push(PathElement::new(
                vec![
                    (xm - slot * 0.2, a.min.max(lo)),
                    (xm + slot * 0.2, a.min.max(lo)),
                ],
                BLACK.stroke_width(1),
            ));
        }
        chart
            .draw_series(bars)
            .map_err(|e| err(&e))?
            .label(m.label())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        chart.draw_series(whiskers).map_err(|e| err(&e))?;
    }
    // The overcommit levels under their groups of bars.
    for (i, oc) in ocs.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, lo));
        let label = format!("{} ({} vCPUs on 2)", oc.label(), oc.guests() * oc.vcpus());
        root.draw(&Text::new(
            label.clone(),
            (px - 4 * label.len() as i32, py + 12),
            ("sans-serif", 16).into_font().color(&BLACK),
        ))
        .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_text() {
        let r = crate::markdown::tests::results();
        let dir = std::env::temp_dir().join(format!("pvlock-bench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.svg");
        chart(&r.summary, Workload::Contended, "contended", &p).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("pvlock-hostkvm"));
        assert!(svg.contains("native-2vcpu"));
        assert!(svg.contains("2x (4 vCPUs on 2)"));
        assert!(svg.contains("<rect"));
        // Nothing measured: still a chart, saying so.
        chart(&r.summary, Workload::Hackbench, "hackbench", &p).unwrap();
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .contains("no measurement"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
