// SPDX-License-Identifier: GPL-2.0

//! Number formats of the tools' output.
//!
//! Counts come two ways: exact with separators where a person compares
//! counters ([`fmt_count_grouped`], pvlock-stat), and short where a table
//! has many ([`fmt_count_short`], the benchmark report).

/// A count exactly, with thousands separators: `213,995`.
pub fn fmt_count_grouped(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count short: an integer, with k/M from 10,000 on ([`fmt_num`]):
/// `42`, `374k`.
pub fn fmt_count_short(x: f64) -> String {
    if x.abs() >= 1e4 {
        fmt_num(x)
    } else {
        format!("{x:.0}")
    }
}

/// Three significant digits, with k/M for large numbers: `0.965`, `95.2`,
/// `2734`, `27.3k`, `6.59M`.
pub fn fmt_num(x: f64) -> String {
    if x.is_infinite() {
        return "inf".into();
    }
    if x.is_nan() {
        return "nan".into();
    }
    let (v, suffix) = if x.abs() >= 1e6 {
        (x / 1e6, "M")
    } else if x.abs() >= 1e4 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    format!("{s}{suffix}")
}

/// Seconds as minutes and seconds, `MM:SS` (negative as 0).
pub fn fmt_mmss(s: f64) -> String {
    let s = s.max(0.0) as u64;
    format!("{:02}:{:02}", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_separators() {
        assert_eq!(fmt_count_grouped(0), "0");
        assert_eq!(fmt_count_grouped(999), "999");
        assert_eq!(fmt_count_grouped(1000), "1,000");
        assert_eq!(fmt_count_grouped(213995), "213,995");
        assert_eq!(fmt_count_grouped(5257327), "5,257,327");
        assert_eq!(fmt_count_grouped(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn numbers() {
        assert_eq!(fmt_num(259083.7), "259k");
        assert_eq!(fmt_num(2733.7), "2734");
        assert_eq!(fmt_num(27337.0), "27.3k");
        assert_eq!(fmt_num(6589240.0), "6.59M");
        assert_eq!(fmt_num(95.24), "95.2");
        assert_eq!(fmt_num(1.3), "1.30");
        assert_eq!(fmt_num(0.9651), "0.965");
        assert_eq!(fmt_num(f64::INFINITY), "inf");
        assert_eq!(fmt_count_short(42.0), "42");
        assert_eq!(fmt_count_short(374_123.0), "374k");
    }

    #[test]
    fn minutes_and_seconds() {
        assert_eq!(fmt_mmss(0.0), "00:00");
        assert_eq!(fmt_mmss(-3.0), "00:00");
        assert_eq!(fmt_mmss(412.9), "06:52");
        assert_eq!(fmt_mmss(6000.0), "100:00");
    }
}
