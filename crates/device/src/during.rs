//! Turning a GPU library's error into a [`GpuError`] that names the step and keeps the cause:
//! `result.during("allocating 1024 MiB on the GPU")?`.

use crate::compute::GpuError;

/// An error a GPU library returned.
pub(crate) trait Cause {
    /// This cause, as the error of `step`.
    fn at(self, step: String) -> GpuError;
}

impl Cause for cudarc::driver::DriverError {
    fn at(self, step: String) -> GpuError {
        let name = self
            .error_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", self.0));
        GpuError::Cuda {
            step,
            code: self.0 as u32,
            name,
        }
    }
}

impl Cause for cudarc::cublaslt::result::CublasError {
    fn at(self, step: String) -> GpuError {
        GpuError::library(step, "cuBLASLt", format!("{:?}", self.0))
    }
}

impl Cause for cudarc::nvrtc::CompileError {
    fn at(self, step: String) -> GpuError {
        GpuError::library(step, "NVRTC", self)
    }
}

impl Cause for cudarc::nccl::result::NcclError {
    fn at(self, step: String) -> GpuError {
        GpuError::library(step, "NCCL", format!("{:?}", self.0))
    }
}

/// `.during(step)` on any result whose error is a [`Cause`].
pub(crate) trait During<T> {
    fn during(self, step: &str) -> Result<T, GpuError>;
}

impl<T, E: Cause> During<T> for Result<T, E> {
    fn during(self, step: &str) -> Result<T, GpuError> {
        self.map_err(|e| e.at(step.to_string()))
    }
}
