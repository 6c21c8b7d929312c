// refdev aten kernels.
//
// refdev storages live in host memory owned by the refdev allocator.  The
// native kernels below handle allocation, copies, resizing, filling and the
// view operators (whose aliasing a copying fallback could not preserve).
// Every other aten operator goes through a boxed fallback that copies the
// refdev inputs to fresh CPU tensors, runs the CPU kernel, copies the results
// back to refdev and writes mutated arguments back into the original refdev
// tensors.  Tensors on the wrong device are rejected instead of being
// silently computed on.
#include "refdev.h"

#include <ATen/EmptyTensor.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <c10/core/TensorOptions.h>
#include <torch/library.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace refdev {

// ---------------------------------------------------------------------------
// Fallback statistics (which operators ran on the host, how often).
// ---------------------------------------------------------------------------
namespace {
struct FallbackCounter {
  std::mutex mutex;
  std::unordered_map<std::string, int64_t> counts;
};

FallbackCounter& fallback_counter() {
  static auto* counter = new FallbackCounter();
  return *counter;
}
} // namespace

std::vector<std::pair<std::string, int64_t>> fallback_op_counts() {
  auto& counter = fallback_counter();
  std::lock_guard<std::mutex> lock(counter.mutex);
  return {counter.counts.begin(), counter.counts.end()};
}

void reset_fallback_op_counts() {
  auto& counter = fallback_counter();
  std::lock_guard<std::mutex> lock(counter.mutex);
  counter.counts.clear();
}

namespace {

using at::IntArrayRef;

c10::DispatchKeySet refdev_keys() {
  return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

bool on_refdev(const at::Tensor& t) {
  return t.defined() && t.device().type() == kDeviceType;
}

void expect_refdev(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.defined(), op, ": argument '", arg, "' is undefined");
  TORCH_CHECK(
      on_refdev(t),
      op,
      ": expected argument '",
      arg,
      "' to be a refdev tensor, but it is on ",
      t.device(),
      " (refdev and ",
      t.device().type(),
      " tensors cannot be mixed)");
}

void expect_same_device(
    const at::Tensor& reference,
    const at::Tensor& t,
    const char* op,
    const char* arg) {
  expect_refdev(t, op, arg);
  TORCH_CHECK(
      t.device() == reference.device(),
      op,
      ": expected all tensors to be on the same device, but argument '",
      arg,
      "' is on ",
      t.device(),
      " and the others on ",
      reference.device());
}

c10::Device resolve_device(std::optional<c10::Device> device) {
  if (!device.has_value()) {
    return c10::Device(kDeviceType, current_device());
  }
  TORCH_CHECK(
      device->type() == kDeviceType,
      "refdev: cannot allocate a refdev tensor on ",
      *device);
  const c10::DeviceIndex index =
      device->has_index() ? device->index() : current_device();
  check_device_index(index);
  return c10::Device(kDeviceType, index);
}

void check_factory_options(
    std::optional<at::Layout> layout,
    std::optional<bool> pin_memory) {
  // NotImplementedError, not RuntimeError: a missing layout is a feature refdev
  // lacks (like a missing kernel), and test suites tell the two apart.
  TORCH_CHECK_NOT_IMPLEMENTED(
      layout.value_or(at::kStrided) == at::kStrided,
      "refdev only supports strided tensors, got layout ",
      *layout);
  TORCH_CHECK(
      !pin_memory.value_or(false),
      "refdev: only dense CPU tensors can be pinned");
}

// ---- host views of refdev memory ------------------------------------------

// A CPU storage over the same bytes as a refdev storage (does not own them).
c10::Storage host_storage(const c10::Storage& storage) {
  return c10::Storage(
      c10::Storage::use_byte_size_t(),
      storage.nbytes(),
      c10::DataPtr(storage.mutable_data(), c10::Device(c10::DeviceType::CPU)),
      /*allocator=*/nullptr,
      /*resizable=*/false);
}

// A CPU tensor over `storage` with the geometry of `t`; `keep_bits` carries
// over the lazy conjugate/negative bits.
at::Tensor alias_on(
    const c10::Storage& storage,
    const at::Tensor& t,
    bool keep_bits) {
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage),
      c10::DispatchKeySet(c10::DispatchKey::CPU),
      t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(
      t.sizes(), t.strides(), t.storage_offset());
  if (keep_bits) {
    out._set_conj(t.is_conj());
    out._set_neg(t.is_neg());
  }
  return out;
}

// A CPU tensor viewing the host memory of refdev tensor `t` (no copy).
at::Tensor host_alias(const at::Tensor& t, bool keep_bits = true) {
  return alias_on(host_storage(t.storage()), t, keep_bits);
}

// Stores host tensor `source` into refdev tensor `dst` (through `host_dst`, its
// host view) on dst's device's current stream: now, or queued on a side
// stream (stream.cpp), with `source` as it is at launch.
void store(
    const at::Tensor& dst,
    const at::Tensor& host_dst,
    const at::Tensor& source) {
  const c10::DeviceIndex index = dst.device().index();
  const at::Tensor taken = stream_defers(index) ? source.clone() : source;
  stream_write(index, [keep = dst.storage(), host_dst, taken] {
    host_dst.copy_(taken);
  });
}

// A fresh CPU copy of a refdev tensor; other tensors are returned unchanged.
at::Tensor to_host(const at::Tensor& t) {
  if (!on_refdev(t)) {
    return t;
  }
  at::Tensor copy =
      host_alias(t, /*keep_bits=*/false).clone(at::MemoryFormat::Preserve);
  copy._set_conj(t.is_conj());
  copy._set_neg(t.is_neg());
  return copy;
}

at::Tensor refdev_empty_strided_on(
    IntArrayRef size,
    IntArrayRef stride,
    at::ScalarType dtype,
    c10::Device device) {
  const c10::DeviceGuard guard(device);
  return at::Tensor(at::detail::empty_strided_generic(
      size, stride, device_allocator(), refdev_keys(), dtype));
}

// A fresh refdev copy of a CPU tensor on `device`.
at::Tensor to_device(const at::Tensor& t, c10::Device device) {
  if (!t.defined() || on_refdev(t)) {
    return t;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      t.layout() == at::kStrided,
      "refdev only supports strided tensors, the host kernel returned layout ",
      t.layout());
  TORCH_CHECK(
      t.device().is_cpu(),
      "refdev: cannot move a tensor on ",
      t.device(),
      " to ",
      device);
  at::Tensor out;
  if (t.is_non_overlapping_and_dense()) {
    out = refdev_empty_strided_on(t.sizes(), t.strides(), t.scalar_type(), device);
  } else {
    const c10::DeviceGuard guard(device);
    out = at::Tensor(at::detail::empty_generic(
        t.sizes(), device_allocator(), refdev_keys(), t.scalar_type(),
        std::nullopt));
  }
  if (out.numel() > 0) {
    store(
        out,
        host_alias(out, /*keep_bits=*/false),
        alias_on(t.storage(), t, /*keep_bits=*/false));
  }
  out._set_conj(t.is_conj());
  out._set_neg(t.is_neg());
  return out;
}

// ---------------------------------------------------------------------------
// Native kernels.
// ---------------------------------------------------------------------------

at::Tensor refdev_empty(
    IntArrayRef size,
    std::optional<at::ScalarType> dtype,
    std::optional<at::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<at::MemoryFormat> memory_format) {
  check_factory_options(layout, pin_memory);
  const c10::Device target = resolve_device(device);
  const c10::DeviceGuard guard(target);
  return at::Tensor(at::detail::empty_generic(
      size,
      device_allocator(),
      refdev_keys(),
      c10::dtype_or_default(dtype),
      memory_format));
}

at::Tensor refdev_empty_strided(
    IntArrayRef size,
    IntArrayRef stride,
    std::optional<at::ScalarType> dtype,
    std::optional<at::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  check_factory_options(layout, pin_memory);
  return refdev_empty_strided_on(
      size, stride, c10::dtype_or_default(dtype), resolve_device(device));
}

// self -> dst, where each side is either a CPU or a refdev tensor.
at::Tensor refdev_copy_from(
    const at::Tensor& self,
    const at::Tensor& dst,
    bool /*non_blocking: refdev copies are always synchronous*/) {
  TORCH_CHECK(self.defined() && dst.defined(), "_copy_from: undefined tensor");
  TORCH_CHECK(
      on_refdev(self) || self.device().is_cpu(),
      "refdev: copying from ",
      self.device(),
      " to ",
      dst.device(),
      " is not supported");
  TORCH_CHECK(
      on_refdev(dst) || dst.device().is_cpu(),
      "refdev: copying from ",
      self.device(),
      " to ",
      dst.device(),
      " is not supported");
  if (dst.numel() == 0) {
    return dst;
  }
  if (on_refdev(self)) {
    stream_read(self.device().index());
  }
  at::Tensor host_dst;
  at::Tensor host_src;
  if (on_refdev(self) && on_refdev(dst) &&
      self.storage().unsafeGetStorageImpl() ==
          dst.storage().unsafeGetStorageImpl()) {
    // Same memory on both sides: share one host storage so that the CPU
    // copy kernel sees the overlap.
    const c10::Storage shared = host_storage(dst.storage());
    host_dst = alias_on(shared, dst, /*keep_bits=*/true);
    host_src = alias_on(shared, self, /*keep_bits=*/true);
  } else {
    host_dst = on_refdev(dst) ? host_alias(dst) : dst;
    host_src = on_refdev(self) ? host_alias(self) : self;
  }
  if (on_refdev(dst)) {
    store(dst, host_dst, host_src);
  } else {
    host_dst.copy_(host_src);
  }
  return dst;
}

const at::Tensor& refdev_resize_(
    const at::Tensor& self,
    IntArrayRef size,
    std::optional<at::MemoryFormat> memory_format) {
  expect_refdev(self, "resize_", "self");
  for (const auto dim : size) {
    TORCH_CHECK(
        dim >= 0,
        "Trying to create tensor with negative dimension ",
        dim,
        ": ",
        size);
  }
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) {
    const size_t needed = at::detail::computeStorageNbytesContiguous(
        size, self.dtype().itemsize(), self.storage_offset());
    if (needed > self.storage().nbytes()) {
      resize_storage_bytes(self.storage().unsafeGetStorageImpl(), needed);
    }
    impl->set_sizes_contiguous(size);
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(
        *memory_format != at::MemoryFormat::Preserve,
        "Unsupported memory format ",
        *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor refdev_copy_from_and_resize(
    const at::Tensor& self,
    const at::Tensor& dst) {
  if (self.sizes() != dst.sizes()) {
    if (on_refdev(dst)) {
      refdev_resize_(dst, self.sizes(), std::nullopt);
    } else {
      dst.resize_(self.sizes());
    }
  }
  return refdev_copy_from(self, dst, false);
}

at::Tensor& refdev_fill_scalar_(at::Tensor& self, const at::Scalar& value) {
  expect_refdev(self, "fill_", "self");
  if (self.numel() > 0) {
    stream_write(
        self.device().index(),
        [keep = self.storage(), host = host_alias(self), value] {
          host.fill_(value);
        });
  }
  return self;
}

at::Tensor& refdev_fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  expect_refdev(self, "fill_", "self");
  TORCH_CHECK(
      value.dim() == 0,
      "fill_ only supports 0-dimension value tensor but got tensor with ",
      value.dim(),
      " dimensions.");
  TORCH_CHECK(
      on_refdev(value) || value.device().is_cpu(),
      "fill_: value tensor on ",
      value.device(),
      " cannot fill a refdev tensor");
  if (on_refdev(value)) {
    stream_read(value.device().index());
  }
  const at::Scalar scalar =
      on_refdev(value) ? host_alias(value).item() : value.item();
  return refdev_fill_scalar_(self, scalar);
}

at::Tensor& refdev_zero_(at::Tensor& self) {
  expect_refdev(self, "zero_", "self");
  if (self.numel() > 0) {
    stream_write(
        self.device().index(),
        [keep = self.storage(), host = host_alias(self)] { host.zero_(); });
  }
  return self;
}

at::Scalar refdev_local_scalar_dense(const at::Tensor& self) {
  expect_refdev(self, "_local_scalar_dense", "self");
  TORCH_CHECK(
      self.numel() > 0, "_local_scalar_dense: Empty tensor not supported");
  stream_read(self.device().index());
  return host_alias(self).item();
}

// ---- views -----------------------------------------------------------------

at::Tensor make_view(
    const at::Tensor& self,
    IntArrayRef sizes,
    IntArrayRef strides,
    int64_t storage_offset,
    caffe2::TypeMeta dtype) {
  TORCH_CHECK(
      sizes.size() == strides.size(),
      "mismatch in length of strides and shape");
  for (const auto dim : sizes) {
    TORCH_CHECK(
        dim >= 0, "Trying to create tensor with negative dimension ", dim);
  }
  for (const auto stride : strides) {
    TORCH_CHECK(
        stride >= 0, "as_strided: Negative strides are not supported");
  }
  TORCH_CHECK(
      storage_offset >= 0,
      "Tensor: invalid storage offset ",
      storage_offset);
  const size_t needed = at::detail::computeStorageNbytes(
      sizes, strides, dtype.itemsize(), static_cast<size_t>(storage_offset));
  TORCH_CHECK(
      needed <= self.storage().nbytes(),
      "refdev: a view with sizes ",
      sizes,
      ", strides ",
      strides,
      ", storage offset ",
      storage_offset,
      " and itemsize ",
      dtype.itemsize(),
      " needs ",
      needed,
      " bytes, out of bounds for a storage of ",
      self.storage().nbytes(),
      " bytes");
  at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(self.storage()), self.key_set(), dtype);
  view.unsafeGetTensorImpl()->set_sizes_and_strides(
      sizes, strides, storage_offset);
  return view;
}

// Re-creates, on refdev, the geometry a CPU view op produced on host_alias().
at::Tensor view_like_host(const at::Tensor& self, const at::Tensor& host_view) {
  return make_view(
      self,
      host_view.sizes(),
      host_view.strides(),
      host_view.storage_offset(),
      host_view.dtype());
}

at::Tensor refdev_as_strided(
    const at::Tensor& self,
    IntArrayRef size,
    IntArrayRef stride,
    std::optional<int64_t> storage_offset) {
  expect_refdev(self, "as_strided", "self");
  return make_view(
      self,
      size,
      stride,
      storage_offset.value_or(self.storage_offset()),
      self.dtype());
}

at::Tensor refdev_view(const at::Tensor& self, IntArrayRef size) {
  expect_refdev(self, "view", "self");
  const at::DimVector shape = at::infer_size_dv(size, self.numel());
  const auto stride =
      at::detail::computeStride(self.sizes(), self.strides(), shape);
  TORCH_CHECK(
      stride.has_value(),
      "view size is not compatible with input tensor's size and stride (at "
      "least one dimension spans across two contiguous subspaces). Use "
      ".reshape(...) instead.");
  return make_view(
      self, shape, *stride, self.storage_offset(), self.dtype());
}

at::Tensor refdev_reshape_alias(
    const at::Tensor& self,
    IntArrayRef size,
    IntArrayRef stride) {
  expect_refdev(self, "_reshape_alias", "self");
  return make_view(self, size, stride, self.storage_offset(), self.dtype());
}

at::Tensor refdev_unfold(
    const at::Tensor& self,
    int64_t dimension,
    int64_t size,
    int64_t step) {
  expect_refdev(self, "unfold", "self");
  return view_like_host(self, host_alias(self).unfold(dimension, size, step));
}

at::Tensor refdev_view_as_real(const at::Tensor& self) {
  expect_refdev(self, "view_as_real", "self");
  return view_like_host(self, at::view_as_real(host_alias(self)));
}

at::Tensor refdev_view_as_complex(const at::Tensor& self) {
  expect_refdev(self, "view_as_complex", "self");
  return view_like_host(self, at::view_as_complex(host_alias(self)));
}

// ---- storage manipulation ---------------------------------------------------

at::Tensor& refdev_set_storage_(
    at::Tensor& self,
    at::Storage source,
    int64_t storage_offset,
    IntArrayRef size,
    IntArrayRef stride) {
  expect_refdev(self, "set_", "self");
  TORCH_CHECK(
      source.device() == self.device(),
      "Attempted to set the storage of a tensor on device \"",
      self.device(),
      "\" to a storage on different device \"",
      source.device(),
      "\".  This is no longer allowed; the devices must match.");
  TORCH_CHECK(
      storage_offset >= 0, "Tensor: invalid storage offset ", storage_offset);
  TORCH_CHECK(
      stride.empty() || stride.size() == size.size(),
      "set_: mismatch in length of strides and shape");
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storage_offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  const size_t needed = at::detail::computeStorageNbytes(
      self.sizes(),
      self.strides(),
      self.dtype().itemsize(),
      static_cast<size_t>(storage_offset));
  if (needed > self.storage().nbytes()) {
    resize_storage_bytes(self.storage().unsafeGetStorageImpl(), needed);
  }
  return self;
}

at::Tensor& refdev_set_source_storage_(at::Tensor& self, at::Storage source) {
  const auto itemsize = static_cast<int64_t>(self.dtype().itemsize());
  const auto nbytes = static_cast<int64_t>(source.nbytes());
  TORCH_CHECK(
      nbytes % itemsize == 0,
      "set_: storage of ",
      nbytes,
      " bytes is not a multiple of the element size ",
      itemsize);
  const int64_t numel = nbytes / itemsize;
  return refdev_set_storage_(self, std::move(source), 0, {numel}, {});
}

at::Tensor& refdev_set_source_tensor_(
    at::Tensor& self,
    const at::Tensor& source) {
  expect_refdev(source, "set_", "source");
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) {
    return self;
  }
  return refdev_set_storage_(
      self,
      source.storage(),
      source.storage_offset(),
      source.sizes(),
      source.strides());
}

at::Tensor& refdev_set_empty_(at::Tensor& self) {
  expect_refdev(self, "set_", "self");
  c10::DataPtr data;
  {
    const c10::DeviceGuard guard(self.device());
    data = device_allocator()->allocate(0);
  }
  c10::Storage storage(
      c10::Storage::use_byte_size_t(),
      0,
      std::move(data),
      device_allocator(),
      /*resizable=*/true);
  return refdev_set_storage_(self, std::move(storage), 0, {0}, {});
}

bool refdev_is_set_to(const at::Tensor& self, const at::Tensor& tensor) {
  return self.storage().unsafeGetStorageImpl() ==
      tensor.storage().unsafeGetStorageImpl() &&
      self.storage_offset() == tensor.storage_offset() &&
      self.sizes() == tensor.sizes() && self.strides() == tensor.strides();
}

void refdev_record_stream(at::Tensor& self, c10::Stream stream) {
  expect_refdev(self, "record_stream", "self");
  TORCH_CHECK(
      stream.device_type() == kDeviceType,
      "record_stream: expected a refdev stream, got a stream on ",
      stream.device());
  // Memory is released synchronously; nothing to track.
}

// ---- convolution --------------------------------------------------------------
// at::convolution routes tensors of unknown backends to the "overrideable"
// entry points, which have no CPU kernel to fall back to.

at::Tensor refdev_convolution(
    const at::Tensor& input,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef dilation,
    bool transposed,
    IntArrayRef output_padding,
    int64_t groups) {
  expect_refdev(input, "convolution", "input");
  expect_same_device(input, weight, "convolution", "weight");
  stream_read(input.device().index());
  std::optional<at::Tensor> host_bias;
  if (bias.has_value() && bias->defined()) {
    expect_same_device(input, *bias, "convolution", "bias");
    host_bias = to_host(*bias);
  }
  const at::Tensor out = at::convolution(
      to_host(input),
      to_host(weight),
      host_bias,
      stride,
      padding,
      dilation,
      transposed,
      output_padding,
      groups);
  return to_device(out, input.device());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> refdev_convolution_backward(
    const at::Tensor& grad_output,
    const at::Tensor& input,
    const at::Tensor& weight,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef dilation,
    bool transposed,
    IntArrayRef output_padding,
    int64_t groups,
    std::array<bool, 3> output_mask) {
  expect_refdev(grad_output, "convolution_backward", "grad_output");
  expect_same_device(grad_output, input, "convolution_backward", "input");
  expect_same_device(grad_output, weight, "convolution_backward", "weight");
  stream_read(grad_output.device().index());
  const std::vector<int64_t> bias_sizes{grad_output.size(1)};
  auto grads = at::convolution_backward(
      to_host(grad_output),
      to_host(input),
      to_host(weight),
      output_mask[2] ? at::OptionalIntArrayRef(bias_sizes)
                     : at::OptionalIntArrayRef(),
      stride,
      padding,
      dilation,
      transposed,
      output_padding,
      groups,
      output_mask);
  const c10::Device device = grad_output.device();
  return {
      to_device(std::get<0>(grads), device),
      to_device(std::get<1>(grads), device),
      to_device(std::get<2>(grads), device)};
}

// ---- shallow-copy compatibility ----------------------------------------------
// nn.Module._apply (module.to("refdev"), .refdev(), .cpu()) moves a parameter
// in place with `param.data = moved` only when
// torch._has_compatible_shallow_copy_type(param, moved) holds; otherwise it
// gives every module a new Parameter, which silently unties shared
// parameters (an lm_head tied to its embedding then gets its own copy and
// the embedding misses the head's gradient).  torch's own check accepts CPU,
// CUDA, MPS, ... but not PrivateUse1; refdev tensors are plain dense
// TensorImpls like CUDA's, so dense CPU <-> refdev is as compatible as
// CPU <-> CUDA.  Reached only when one of the two tensors is on refdev.

bool is_dense_cpu_or_refdev(c10::DispatchKeySet keys) {
  constexpr auto backends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::PrivateUse1Bit});
  return keys.has(c10::DispatchKey::Dense) && keys.has_any(backends);
}

bool refdev_has_compatible_shallow_copy_type(
    const at::Tensor& self,
    const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(
          from.key_set())) {
    return true;
  }
  return is_dense_cpu_or_refdev(self.key_set()) &&
      is_dense_cpu_or_refdev(from.key_set());
}

// ---------------------------------------------------------------------------
// Boxed fallback: run any other operator on the host.
// ---------------------------------------------------------------------------

std::string describe_argument(
    const c10::FunctionSchema& schema,
    size_t index) {
  return "argument '" + schema.arguments()[index].name() + "' of " +
      c10::toString(schema.operator_name());
}

class DeviceChecker {
 public:
  explicit DeviceChecker(const c10::FunctionSchema& schema) : schema_(schema) {}

  // `lenient`: CPU tensors are tolerated (indices of index/index_put, like on
  // CUDA).  0-dim CPU tensors are tolerated as inputs (CPU scalars), never as
  // an argument the operator writes (an out= or self of an in-place op): CUDA's
  // TensorIterator allows CPU scalars only among the inputs.
  void note(const at::Tensor& t, size_t arg_index, bool lenient) {
    if (!t.defined()) {
      return;
    }
    const c10::Device device = t.device();
    if (device.type() == kDeviceType) {
      if (!refdev_device_.has_value()) {
        refdev_device_ = device;
      } else {
        TORCH_CHECK(
            *refdev_device_ == device,
            "Expected all tensors to be on the same device, but found at "
            "least two devices, ",
            *refdev_device_,
            " and ",
            device,
            "! (",
            describe_argument(schema_, arg_index),
            ")");
      }
      return;
    }
    if (device.is_cpu() && (lenient || (t.dim() == 0 && !written(arg_index)))) {
      return;
    }
    if (!foreign_.has_value()) {
      foreign_ = std::make_pair(device, arg_index);
    }
  }

  // Raises if a refdev tensor was mixed with a (non-scalar) foreign tensor.
  void check() const {
    if (refdev_device_.has_value() && foreign_.has_value()) {
      TORCH_CHECK(
          false,
          "Expected all tensors to be on the same device, but found at least "
          "two devices, ",
          *refdev_device_,
          " and ",
          foreign_->first,
          "! (",
          describe_argument(schema_, foreign_->second),
          "; refdev does not compute on tensors of other devices, move them "
          "with .to('refdev') first)");
    }
  }

  const std::optional<c10::Device>& refdev_device() const {
    return refdev_device_;
  }

 private:
  bool written(size_t arg_index) const {
    const c10::AliasInfo* info = schema_.arguments()[arg_index].alias_info();
    return info != nullptr && info->isWrite();
  }

  const c10::FunctionSchema& schema_;
  std::optional<c10::Device> refdev_device_;
  std::optional<std::pair<c10::Device, size_t>> foreign_;
};

struct MovedTensor {
  size_t arg_index;
  at::Tensor original;
  at::Tensor host;
  std::vector<int64_t> host_strides; // before the CPU kernel ran
};

struct MovedList {
  size_t arg_index;
  std::vector<at::Tensor> originals;
  std::vector<at::Tensor> hosts;
  std::vector<std::vector<int64_t>> host_strides; // before the CPU kernel ran
};

std::vector<int64_t> strides_of(const at::Tensor& t) {
  return t.defined() ? t.strides().vec() : std::vector<int64_t>();
}

void count_fallback(const c10::OperatorHandle& op) {
  auto& counter = fallback_counter();
  std::string name = c10::toString(op.operator_name());
  std::lock_guard<std::mutex> lock(counter.mutex);
  counter.counts[std::move(name)] += 1;
}

// A CPU kernel may lay its out argument out anew (replication_pad2d's lays its
// output out as its input is laid out, channels_last included): the refdev
// tensor takes the same sizes and strides, as the CPU's own out tensor would.
void write_back(
    const at::Tensor& host,
    const at::Tensor& original,
    const std::vector<int64_t>& host_strides) {
  if (!original.defined() || !on_refdev(original)) {
    return;
  }
  if (host.strides() != IntArrayRef(host_strides) &&
      host.is_non_overlapping_and_dense()) {
    if (original.sizes() != host.sizes()) {
      refdev_resize_(original, host.sizes(), std::nullopt);
    }
    original.unsafeGetTensorImpl()->set_sizes_and_strides(
        host.sizes(), host.strides());
  }
  refdev_copy_from_and_resize(host, original);
}

// Operators that mutate arguments their schema does not mark as mutable
// (legacy signatures); their updates must still reach the refdev tensors.
bool mutates_unannotated(const c10::FunctionSchema& schema, size_t arg_index) {
  // native_batch_norm(input, weight, bias, running_mean, running_var,
  //                   training, momentum, eps) updates the running stats.
  return schema.name() == "aten::native_batch_norm" &&
      schema.overload_name().empty() && (arg_index == 3 || arg_index == 4);
}

void refdev_cpu_fallback(
    const c10::OperatorHandle& op,
    torch::jit::Stack* stack) {
  count_fallback(op);
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t num_arguments = arguments.size();
  const size_t arguments_begin = stack->size() - num_arguments;

  // Pass 1: validate devices.
  DeviceChecker checker(schema);
  std::optional<c10::Device> explicit_device;
  for (size_t i = 0; i < num_arguments; ++i) {
    const c10::IValue& value = (*stack)[arguments_begin + i];
    if (value.isTensor()) {
      checker.note(value.toTensor(), i, /*lenient=*/false);
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) {
        checker.note(t, i, /*lenient=*/false);
      }
    } else if (value.isOptionalTensorList()) {
      for (const auto& t : value.toOptionalTensorVector()) {
        if (t.has_value()) {
          checker.note(*t, i, /*lenient=*/true);
        }
      }
    } else if (value.isDevice()) {
      explicit_device = value.toDevice();
    }
  }
  checker.check();

  c10::Device target(kDeviceType, current_device());
  if (explicit_device.has_value()) {
    target = explicit_device->type() == kDeviceType
        ? resolve_device(explicit_device)
        : *explicit_device;
  } else if (checker.refdev_device().has_value()) {
    target = *checker.refdev_device();
  }
  const bool target_is_refdev = target.type() == kDeviceType;
  const c10::DeviceGuard guard(
      target_is_refdev ? target : c10::Device(kDeviceType, current_device()));
  if (checker.refdev_device().has_value()) {
    stream_read(checker.refdev_device()->index());
  }

  // Pass 2: replace refdev tensors with host copies.
  std::vector<MovedTensor> moved_tensors;
  std::vector<MovedList> moved_lists;
  std::vector<MovedList> moved_optional_lists;
  for (size_t i = 0; i < num_arguments; ++i) {
    c10::IValue& slot = (*stack)[arguments_begin + i];
    if (slot.isTensor()) {
      const at::Tensor original = slot.toTensor();
      if (on_refdev(original)) {
        at::Tensor host = to_host(original);
        slot = c10::IValue(host);
        std::vector<int64_t> strides = strides_of(host);
        moved_tensors.push_back(
            {i, original, std::move(host), std::move(strides)});
      }
    } else if (slot.isTensorList()) {
      MovedList entry{i, slot.toTensorVector(), {}, {}};
      entry.hosts.reserve(entry.originals.size());
      for (const at::Tensor& t : entry.originals) {
        entry.hosts.push_back(t.defined() ? to_host(t) : t);
        entry.host_strides.push_back(strides_of(entry.hosts.back()));
      }
      slot = c10::IValue(c10::List<at::Tensor>(entry.hosts));
      moved_lists.push_back(std::move(entry));
    } else if (slot.isOptionalTensorList()) {
      const auto values = slot.toOptionalTensorVector();
      MovedList entry{i, {}, {}, {}};
      c10::List<std::optional<at::Tensor>> hosts;
      for (const auto& t : values) {
        const at::Tensor original = t.has_value() ? *t : at::Tensor();
        const at::Tensor host = original.defined() ? to_host(original) : original;
        entry.originals.push_back(original);
        entry.hosts.push_back(host);
        entry.host_strides.push_back(strides_of(host));
        hosts.push_back(
            host.defined() ? std::optional<at::Tensor>(host) : std::nullopt);
      }
      slot = c10::IValue(std::move(hosts));
      moved_optional_lists.push_back(std::move(entry));
    } else if (slot.isDevice() && slot.toDevice().type() == kDeviceType) {
      slot = c10::IValue(c10::Device(c10::DeviceType::CPU));
    }
  }

  // Pass 3: run the CPU kernel.
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  // Pass 4: write mutated arguments back into the refdev originals.
  auto is_mutated = [&](size_t arg_index) {
    const c10::AliasInfo* info = arguments[arg_index].alias_info();
    return (info != nullptr && info->isWrite()) ||
        mutates_unannotated(schema, arg_index);
  };
  for (const auto& moved : moved_tensors) {
    if (is_mutated(moved.arg_index)) {
      write_back(moved.host, moved.original, moved.host_strides);
    }
  }
  for (const auto* lists : {&moved_lists, &moved_optional_lists}) {
    for (const auto& moved : *lists) {
      if (!is_mutated(moved.arg_index)) {
        continue;
      }
      for (size_t k = 0; k < moved.originals.size(); ++k) {
        if (moved.hosts[k].defined()) {
          write_back(moved.hosts[k], moved.originals[k], moved.host_strides[k]);
        }
      }
    }
  }

  // Pass 5: returns.  Mutable aliases return the original refdev argument;
  // fresh results are copied to the target device.
  const auto& returns = schema.returns();
  const size_t num_returns = returns.size();
  const size_t returns_begin = stack->size() - num_returns;
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& slot = (*stack)[returns_begin + r];
    const c10::AliasInfo* info = returns[r].alias_info();
    if (info != nullptr && info->isWrite()) {
      bool found = false;
      for (size_t i = 0; i < num_arguments && !found; ++i) {
        const c10::AliasInfo* arg_info = arguments[i].alias_info();
        if (arg_info == nullptr || !(*arg_info == *info)) {
          continue;
        }
        for (const auto& moved : moved_tensors) {
          if (moved.arg_index == i) {
            slot = c10::IValue(moved.original);
            found = true;
          }
        }
        for (const auto& moved : moved_lists) {
          if (moved.arg_index == i) {
            slot = c10::IValue(c10::List<at::Tensor>(moved.originals));
            found = true;
          }
        }
        // A mutated argument that never left the host (CPU scalar) is
        // already the right object.
        found = true;
      }
      TORCH_CHECK(
          found,
          "refdev fallback: cannot match the mutable return ",
          returns[r],
          " of ",
          schema.operator_name(),
          " to an argument");
      continue;
    }
    TORCH_CHECK(
        info == nullptr,
        "refdev: the view operator ",
        schema.operator_name(),
        " has no refdev kernel, and the host fallback cannot preserve "
        "aliasing");
    if (!target_is_refdev) {
      continue;
    }
    if (slot.isTensor()) {
      slot = c10::IValue(to_device(slot.toTensor(), target));
    } else if (slot.isTensorList()) {
      std::vector<at::Tensor> results = slot.toTensorVector();
      for (auto& t : results) {
        t = to_device(t, target);
      }
      slot = c10::IValue(c10::List<at::Tensor>(std::move(results)));
    }
  }
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(refdev_empty));
  m.impl("empty_strided", TORCH_FN(refdev_empty_strided));
  m.impl("_copy_from", TORCH_FN(refdev_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(refdev_copy_from_and_resize));
  m.impl("resize_", TORCH_FN(refdev_resize_));
  m.impl("fill_.Scalar", TORCH_FN(refdev_fill_scalar_));
  m.impl("fill_.Tensor", TORCH_FN(refdev_fill_tensor_));
  m.impl("zero_", TORCH_FN(refdev_zero_));
  m.impl("_local_scalar_dense", TORCH_FN(refdev_local_scalar_dense));
  m.impl("as_strided", TORCH_FN(refdev_as_strided));
  m.impl("view", TORCH_FN(refdev_view));
  m.impl("_reshape_alias", TORCH_FN(refdev_reshape_alias));
  m.impl("unfold", TORCH_FN(refdev_unfold));
  m.impl("view_as_real", TORCH_FN(refdev_view_as_real));
  m.impl("view_as_complex", TORCH_FN(refdev_view_as_complex));
  m.impl(
      "set_.source_Storage_storage_offset", TORCH_FN(refdev_set_storage_));
  m.impl("set_.source_Storage", TORCH_FN(refdev_set_source_storage_));
  m.impl("set_.source_Tensor", TORCH_FN(refdev_set_source_tensor_));
  m.impl("set_", TORCH_FN(refdev_set_empty_));
  m.impl("is_set_to", TORCH_FN(refdev_is_set_to));
  m.impl("record_stream", TORCH_FN(refdev_record_stream));
  m.impl(
      "_has_compatible_shallow_copy_type",
      TORCH_FN(refdev_has_compatible_shallow_copy_type));
  m.impl("convolution_overrideable", TORCH_FN(refdev_convolution));
  m.impl(
      "convolution_backward_overrideable",
      TORCH_FN(refdev_convolution_backward));

  // Operators with both a CPU kernel and a CompositeExplicitAutograd
  // decomposition would otherwise take the decomposition on refdev; sending
  // them to the host fallback runs the CPU kernel, so refdev results stay
  // identical to CPU (e.g. layer_norm/group_norm in float16/bfloat16).
  constexpr const char* kPreferHostKernel[] = {
      "native_layer_norm",
      "native_group_norm",
      "addr",
      "addr.out",
      "all.dims",
      "all.dims_out",
      "any.dims",
      "any.dims_out",
      "_stack",
      "_stack.out",
      "linalg__powsum",
  };
  for (const char* name : kPreferHostKernel) {
    m.impl(
        name,
        torch::CppFunction::makeFromBoxedFunction<&refdev_cpu_fallback>());
  }
}

// refdev's copy kernels honour the lazy conjugate/negative bits themselves
// (the host views carry them).  Without these fallthroughs the conjugate
// fallback would materialize the source with clone(), whose copy_ calls
// _copy_from again, recursing forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&refdev_cpu_fallback>());
}

} // namespace refdev
