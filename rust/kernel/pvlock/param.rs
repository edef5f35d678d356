// SPDX-License-Identifier: GPL-2.0

//! Module parameters that sysfs shows and, where allowed, writes.
//!
//! The `module!` macro's parameters are set once at load time and are not
//! visible in sysfs. pvlock's tunables must be readable in
//! `/sys/module/<module>/parameters/` and some of them writable at run time,
//! with out-of-range values refused. [`U32Param`] and [`BoolParam`] keep
//! their value in an atomic; [`pvlock_module_param!`] registers one with
//! the module loader (`__param` section) and `modinfo`.
//!
//! Values given on the kernel command line as `module.param=value` reach
//! the module when modprobe loads it, through the same `set` operation.
//!
//! C header: [`include/linux/moduleparam.h`](srctree/include/linux/moduleparam.h)

use crate::{
    bindings,
    prelude::*,
    str::{parse_int::ParseInt, BStr, RawFormatter},
};
// The values are Rust's alone (C reaches them only through the `get` and
// `set` callbacks below) and are read on lock slowpaths: `core`'s atomics
// compile to a plain `mov`, the kernel's `Atomic<T>` to out-of-line calls
// while `CONFIG_RUST_INLINE_HELPERS` is off.
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

/// A `u32` parameter with an inclusive range.
pub struct U32Param {
    value: AtomicU32,
    min: u32,
    max: u32,
}

impl U32Param {
    /// A parameter with value `default` that accepts `min..=max`.
    pub const fn new(default: u32, min: u32, max: u32) -> Self {
        Self {
            value: AtomicU32::new(default),
            min,
            max,
        }
    }

    /// The current value.
    #[inline(always)]
    pub fn get(&self) -> u32 {
        self.value.load(Relaxed)
    }

    /// Sets the value; `EINVAL` (and no change) if it is out of range.
    pub fn set(&self, v: u32) -> Result {
        if v < self.min || v > self.max {
            return Err(EINVAL);
        }
        self.value.store(v, Relaxed);
        Ok(())
    }

    /// The accepted range.
    pub fn range(&self) -> (u32, u32) {
        (self.min, self.max)
    }
}

/// A boolean parameter (accepts what `kstrtobool()` accepts).
pub struct BoolParam {
    value: AtomicBool,
}

impl BoolParam {
    /// A parameter with value `default`.
    pub const fn new(default: bool) -> Self {
        Self {
            value: AtomicBool::new(default),
        }
    }

    /// The current value.
    #[inline(always)]
    pub fn get(&self) -> bool {
        self.value.load(Relaxed)
    }

    /// Sets the value.
    pub fn set(&self, v: bool) {
        self.value.store(v, Relaxed)
    }
}

/// The argument of a `set` operation, without the newline sysfs appends.
///
/// # Safety
///
/// `val` is null or a NUL-terminated string valid for the call.
unsafe fn arg<'a>(val: *const c_char) -> Result<&'a BStr> {
    if val.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: By the function's requirement.
    let s = unsafe { CStr::from_char_ptr(val) }.to_bytes();
    let s = s.strip_suffix(b"\n").unwrap_or(s);
    Ok(BStr::from_bytes(s))
}

/// Writes `v` and a newline into the sysfs page `buf`; returns its length.
///
/// # Safety
///
/// `buf` is a sysfs page buffer of `PAGE_SIZE` bytes.
unsafe fn emit(buf: *mut c_char, v: impl core::fmt::Display) -> c_int {
    // SAFETY: By the function's requirement.
    let mut f = unsafe { RawFormatter::from_buffer(buf.cast(), crate::page::PAGE_SIZE) };
    if writeln!(f, "{v}").is_err() {
        return EINVAL.to_errno();
    }
    f.bytes_written() as c_int
}

/// The parameter an operation is called for.
///
/// # Safety
///
/// `kp` is a `kernel_param` made by [`pvlock_module_param!`] for a `T`.
unsafe fn param<'a, T>(kp: *const bindings::kernel_param) -> &'a T {
    // SAFETY: The macro stores a pointer to a `'static T` in `arg`.
    unsafe { &*(*kp).__bindgen_anon_1.arg.cast::<T>() }
}

/// `param_ops.set` of a [`U32Param`].
///
/// # Safety
///
/// `val` is NULL or a NUL-terminated string and `kp` a parameter made by
/// [`pvlock_module_param!`] for a [`U32Param`] (the module loader's and
/// sysfs's call).
unsafe extern "C" fn set_u32(val: *const c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: The module loader and sysfs pass a NUL-terminated argument and
    // the parameter made by the macro for a `U32Param`.
    let (arg, p) = match unsafe { arg(val) } {
        // SAFETY: As above.
        Ok(a) => (a, unsafe { param::<U32Param>(kp) }),
        Err(e) => return e.to_errno(),
    };
    match u32::from_str(arg).and_then(|v| p.set(v)) {
        Ok(()) => 0,
        Err(_) => EINVAL.to_errno(),
    }
}

/// `param_ops.get` of a [`U32Param`].
///
/// # Safety
///
/// `buf` is a page and `kp` a parameter made by [`pvlock_module_param!`]
/// for a [`U32Param`] (sysfs's call).
unsafe extern "C" fn get_u32(buf: *mut c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: sysfs passes a page and the parameter made by the macro.
    unsafe { emit(buf, param::<U32Param>(kp).get()) }
}

/// `param_ops.set` of a [`BoolParam`].
///
/// # Safety
///
/// As for `set_u32`, for a [`BoolParam`].
unsafe extern "C" fn set_bool(val: *const c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: As in `set_u32`, for a `BoolParam`.
    let (arg, p) = match unsafe { arg(val) } {
        // SAFETY: As above.
        Ok(a) => (a, unsafe { param::<BoolParam>(kp) }),
        Err(e) => return e.to_errno(),
    };
    match crate::str::kstrtobool_bytes(arg) {
        Ok(v) => {
            p.set(v);
            0
        }
        Err(_) => EINVAL.to_errno(),
    }
}

/// `param_ops.get` of a [`BoolParam`].
///
/// # Safety
///
/// As for `get_u32`, for a [`BoolParam`].
unsafe extern "C" fn get_bool(buf: *mut c_char, kp: *const bindings::kernel_param) -> c_int {
    // SAFETY: sysfs passes a page and the parameter made by the macro.
    unsafe {
        emit(
            buf,
            if param::<BoolParam>(kp).get() {
                "Y"
            } else {
                "N"
            },
        )
    }
}

/// Operations for a [`U32Param`].
pub static U32_PARAM_OPS: bindings::kernel_param_ops = bindings::kernel_param_ops {
    flags: 0,
    set: Some(set_u32),
    get: Some(get_u32),
    free: None,
};

/// Operations for a [`BoolParam`].
pub static BOOL_PARAM_OPS: bindings::kernel_param_ops = bindings::kernel_param_ops {
    flags: 0,
    set: Some(set_bool),
    get: Some(get_bool),
    free: None,
};

/// Parameter types that [`pvlock_module_param!`] can register.
pub trait ParamType: Sync + 'static {
    /// The kernel operations.
    const OPS: &'static bindings::kernel_param_ops;
    /// The `parmtype` shown by `modinfo`.
    const TYPE_NAME: &'static str;
}

impl ParamType for U32Param {
    const OPS: &'static bindings::kernel_param_ops = &U32_PARAM_OPS;
    const TYPE_NAME: &'static str = "uint";
}

impl ParamType for BoolParam {
    const OPS: &'static bindings::kernel_param_ops = &BOOL_PARAM_OPS;
    const TYPE_NAME: &'static str = "bool";
}

/// Concatenates strings into a NUL-terminated byte array at compile time
/// (for `.modinfo`); `N` must be the total length plus one.
#[doc(hidden)]
pub const fn modinfo_bytes<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut o = 0;
    let mut p = 0;
    while p < parts.len() {
        let b = parts[p].as_bytes();
        let mut i = 0;
        while i < b.len() {
            out[o] = b[i];
            o += 1;
            i += 1;
        }
        p += 1;
    }
    out
}

/// Registers a `static` [`U32Param`] or [`BoolParam`] as a parameter of the
/// (loadable) module, with sysfs permissions `$perm`.
///
/// ```ignore
/// static SPIN_THRESHOLD: U32Param = U32Param::new(1 << 15, 1, 1 << 24);
/// kernel::pvlock_module_param!(spin_threshold: U32Param = SPIN_THRESHOLD, 0o644,
///                              "Spin loops before halting");
/// ```
#[macro_export]
macro_rules! pvlock_module_param {
    ($name:ident : $ty:ty = $static:ident, $perm:expr, $desc:literal) => {
        const _: () = {
            use $crate::pvlock::param::{modinfo_bytes, ParamType};

            const NAME: &str = stringify!($name);
            const DESC: &str = $desc;
            const TYPE: &str = <$ty as ParamType>::TYPE_NAME;
            const PARM_LEN: usize = "parm=".len() + NAME.len() + 1 + DESC.len() + 1;
            const TYPE_LEN: usize = "parmtype=".len() + NAME.len() + 1 + TYPE.len() + 1;

            #[link_section = ".modinfo"]
            #[used(compiler)]
            static MODINFO_PARM: [u8; PARM_LEN] = modinfo_bytes(&["parm=", NAME, ":", DESC]);
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static MODINFO_TYPE: [u8; TYPE_LEN] = modinfo_bytes(&["parmtype=", NAME, ":", TYPE]);

            static _CHECK_TYPE: &$ty = &$static;

            #[link_section = "__param"]
            #[used(compiler)]
            static KERNEL_PARAM: $crate::module_param::KernelParam =
                $crate::module_param::KernelParam::new($crate::bindings::kernel_param {
                    name: $crate::str::as_char_ptr_in_const_context($crate::c_str!(stringify!(
                        $name
                    ))),
                    // SAFETY: `__this_module` is made by the module loader and
                    // outlives the module's parameters.
                    mod_: unsafe {
                        ::core::ptr::from_ref(&$crate::bindings::__this_module).cast_mut()
                    },
                    ops: <$ty as ParamType>::OPS,
                    perm: $perm,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: $crate::bindings::kernel_param__bindgen_ty_1 {
                        arg: ::core::ptr::from_ref(&$static).cast_mut().cast(),
                    },
                });
        };
    };
}
