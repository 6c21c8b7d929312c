// The smoke layer's C++ extension (verify/test_smoke.py): built in each image's builder stage
// against the image's own torch (verify/smoke/build_ext.py, torch.utils.cpp_extension), shipped
// to the runtime stage as the built library only, and run there on the vendor's device.
//
// One operator registered with PyTorch's dispatcher, as PyTorch's custom C++ operators are:
// its kernel is device-generic (CompositeExplicitAutograd), written with ATen calls, so on a
// device tensor it runs the vendor's own kernels for them. Only ATen's and the dispatcher's
// headers: the JIT build of a source that includes <torch/extension.h> took 42.6 s against
// 18.6 s for this one (torch 2.13.0+cpu, g++ 12, this 2-core machine, 2026-11-28).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace {

// x * alpha + y * y: a multiply, an add and a pointwise square on whatever device x lives on.
at::Tensor scaled_add(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.device() == y.device(), "oota_smoke::scaled_add: x is on ", x.device(),
              ", y on ", y.device());
  return x.mul(alpha).add(y.mul(y));
}

}  // namespace

TORCH_LIBRARY(oota_smoke, m) {
  m.def("scaled_add(Tensor x, Tensor y, float alpha) -> Tensor");
}

TORCH_LIBRARY_IMPL(oota_smoke, CompositeExplicitAutograd, m) {
  m.impl("scaled_add", &scaled_add);
}
