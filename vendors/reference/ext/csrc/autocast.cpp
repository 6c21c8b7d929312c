// Autocast (torch.autocast("refdev")) for refdev.
//
// PyTorch core registers autocast kernels for its in-tree accelerators only.
// refdev applies the same casting policies as CUDA, using the public op lists
// and registration macros of ATen/autocast_mode.h (meant for out-of-tree
// backends).  Every other operator falls through to the next dispatch key.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;
using c10::IntArrayRef;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define REFDEV_LOWER_PRECISION_FP(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define REFDEV_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define REFDEV_FP32_SET_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define REFDEV_DIFFERENT_REDISPATCH_SIGNATURE(...) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(__VA_ARGS__)
#define REFDEV_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

  AT_FORALL_LOWER_PRECISION_FP(REFDEV_LOWER_PRECISION_FP)
  AT_FORALL_FP32(REFDEV_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(REFDEV_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
      REFDEV_DIFFERENT_REDISPATCH_SIGNATURE)
  AT_FORALL_PROMOTE(REFDEV_PROMOTE)

#undef REFDEV_LOWER_PRECISION_FP
#undef REFDEV_FP32
#undef REFDEV_FP32_SET_OPT_DTYPE
#undef REFDEV_DIFFERENT_REDISPATCH_SIGNATURE
#undef REFDEV_PROMOTE
}

} // namespace
