// refdev runtime: device bookkeeping, the device guard (which hands streams
// and events to stream.cpp) and the PrivateUse1 hooks that generic PyTorch
// code queries.  Memory lives in memory.cpp.
#include "refdev.h"
#include "refdev_build_info.h" // generated at build time: REFDEV_TORCH_VERSION

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace refdev {
namespace {

// ---------------------------------------------------------------------------
// Environment configuration (read once).
// ---------------------------------------------------------------------------

c10::DeviceIndex configured_device_count() {
  constexpr c10::DeviceIndex kDefault = 2;
  const auto value = env_integer("REFDEV_DEVICE_COUNT");
  if (!value.has_value()) {
    return kDefault;
  }
  if (*value > kMaxDevices) {
    std::fprintf(
        stderr,
        "[refdev] REFDEV_DEVICE_COUNT=%lld exceeds the maximum of %d; using %d\n",
        *value,
        kMaxDevices,
        kMaxDevices);
    return static_cast<c10::DeviceIndex>(kMaxDevices);
  }
  return static_cast<c10::DeviceIndex>(*value);
}

thread_local c10::DeviceIndex tls_current_device = 0;

// ---------------------------------------------------------------------------
// Device guard: devices here, streams and events in stream.cpp.
// ---------------------------------------------------------------------------

class RefdevGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override {
    return kDeviceType;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    check_type(device);
    const c10::Device previous = getDevice();
    if (device.index() != previous.index()) {
      setDevice(device);
    }
    return previous;
  }

  c10::Device getDevice() const override {
    return c10::Device(kDeviceType, current_device());
  }

  void setDevice(c10::Device device) const override {
    check_type(device);
    if (device.has_index()) {
      set_device(device.index());
    }
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0 && device.index() < device_count()) {
      tls_current_device = device.index();
    }
  }

  c10::Stream getStream(c10::Device device) const override {
    return current_stream(index_of(device));
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(
        c10::Stream::DEFAULT, c10::Device(kDeviceType, index_of(device)));
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool)
      const override {
    return side_stream(index_of(device));
  }

  c10::Stream getNewStream(c10::Device device, int) const override {
    return side_stream(index_of(device));
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return exchange_stream(stream);
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept
      override {
    event_destroy(event);
  }

  void record(
      void** event,
      const c10::Stream& stream,
      const c10::DeviceIndex device_index,
      const c10::EventFlag flag) const override {
    event_record(event, stream, device_index, flag);
  }

  void block(void* event, const c10::Stream& stream) const override {
    event_block(event, stream);
  }

  bool queryEvent(void* event) const override {
    return event_query(event);
  }

  bool queryStream(const c10::Stream& stream) const override {
    return query_stream(stream);
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    synchronize_stream(stream);
  }

  void synchronizeEvent(void* event) const override {
    event_synchronize(event);
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    synchronize(device_index);
  }

  // Memory is freed at once, and queued writes own their storage.
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&)
      const override {}

  double elapsedTime(void* start, void* end, const c10::DeviceIndex)
      const override {
    return event_elapsed_ms(start, end);
  }

 private:
  static void check_type(c10::Device device) {
    TORCH_CHECK(
        device.type() == kDeviceType,
        "refdev device guard got a device of type ",
        device.type());
  }

  static c10::DeviceIndex index_of(c10::Device device) {
    check_type(device);
    return device.has_index() ? device.index() : current_device();
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, RefdevGuardImpl)

// ---------------------------------------------------------------------------
// Hooks consulted by generic PyTorch code (torch.accelerator, pin_memory,
// generators, storage resizing).
// ---------------------------------------------------------------------------

class RefdevHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count() > 0;
  }

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < device_count();
  }

  void init() const override {}

  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = current_device();
    if (device >= 0) {
      set_device(device);
    }
    return previous;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  bool isPinnedPtr(const void* data) const override {
    return is_pinned_ptr(data);
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_allocator();
  }

  c10::Device getDeviceFromPtr(void* data) const override {
    const auto device = device_of_ptr(data);
    TORCH_CHECK(
        device.has_value(),
        "refdev: pointer ",
        data,
        " was not allocated by the refdev allocator");
    return c10::Device(kDeviceType, *device);
  }

  // refdev kernels that need randomness run on the host through the CPU
  // fallback, so the refdev generators are the CPU generators.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return at::detail::getDefaultCPUGenerator();
  }

  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::detail::createCPUGenerator();
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_nbytes)
      const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), new_nbytes);
  }
};

const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new RefdevHooks());
  return true;
}();

} // namespace

// ---------------------------------------------------------------------------
// Public functions (refdev.h).
// ---------------------------------------------------------------------------

c10::DeviceIndex device_count() noexcept {
  static const c10::DeviceIndex count = configured_device_count();
  return count;
}

c10::DeviceIndex current_device() noexcept {
  return tls_current_device;
}

void check_device_index(int64_t index) {
  TORCH_CHECK_INDEX(
      index >= 0 && index < device_count(),
      "refdev: invalid device index ",
      index,
      " (device count is ",
      static_cast<int>(device_count()),
      ", set REFDEV_DEVICE_COUNT to change it)");
}

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_current_device = index;
}

void synchronize(int64_t index) {
  synchronize_device(static_cast<c10::DeviceIndex>(index));
}

std::optional<long long> env_integer(const char* name) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') {
    return std::nullopt;
  }
  char* end = nullptr;
  const long long value = std::strtoll(raw, &end, 10);
  if (end == raw || *end != '\0' || value < 0) {
    std::fprintf(
        stderr,
        "[refdev] ignoring invalid %s=%s (expected a non-negative integer)\n",
        name,
        raw);
    return std::nullopt;
  }
  return value;
}

const char* torch_built_with() noexcept {
  return REFDEV_TORCH_VERSION;
}

} // namespace refdev
