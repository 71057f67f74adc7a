//! Architecture-specific kernels. Each has a scalar reference beside it and a property test comparing them.

#[cfg(target_arch = "x86_64")]
pub mod x86;
