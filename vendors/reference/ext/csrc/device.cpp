// refdev runtime: device bookkeeping, the PrivateUse1 allocator with memory
// statistics, the device guard (streams/events are synchronous no-ops) and the
// PrivateUse1 hooks that generic PyTorch code queries.
#include "refdev.h"
#include "refdev_build_info.h" // generated at build time: REFDEV_TORCH_VERSION

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Storage.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

namespace refdev {
namespace {

// ---------------------------------------------------------------------------
// Environment configuration (read once).
// ---------------------------------------------------------------------------

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

int64_t configured_memory_limit() {
  return env_integer("REFDEV_MEMORY_LIMIT").value_or(0);
}

bool configured_poison() {
  return env_integer("REFDEV_POISON_ALLOC").value_or(0) != 0;
}

thread_local c10::DeviceIndex tls_current_device = 0;

// ---------------------------------------------------------------------------
// Bookkeeping of live host blocks, keyed by address so that interior pointers
// (views with a storage offset) can be resolved too.
// ---------------------------------------------------------------------------

struct Block {
  size_t nbytes;
  c10::DeviceIndex device;
};

class BlockTable {
 public:
  void insert(void* ptr, Block block) {
    blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), block);
  }

  std::optional<Block> erase(void* ptr) {
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == blocks_.end()) {
      return std::nullopt;
    }
    Block block = it->second;
    blocks_.erase(it);
    return block;
  }

  std::optional<Block> find_containing(const void* ptr) const {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(addr);
    if (it == blocks_.begin()) {
      return std::nullopt;
    }
    --it;
    if (addr < it->first + std::max<size_t>(it->second.nbytes, 1)) {
      return it->second;
    }
    return std::nullopt;
  }

 private:
  std::map<uintptr_t, Block> blocks_;
};

struct DeviceMemory {
  std::mutex mutex;
  BlockTable blocks;
  std::array<MemoryStats, kMaxDevices> stats{};
};

// Intentionally leaked: storages may be freed during interpreter shutdown
// after static destructors would have run.
DeviceMemory& device_memory() {
  static auto* memory = new DeviceMemory();
  return *memory;
}

void refdev_free(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  auto& memory = device_memory();
  {
    std::lock_guard<std::mutex> lock(memory.mutex);
    if (auto block = memory.blocks.erase(ptr)) {
      auto& stats = memory.stats[block->device];
      stats.allocated_bytes -= static_cast<int64_t>(block->nbytes);
      stats.active_allocs -= 1;
      stats.num_frees += 1;
    }
  }
  c10::free_cpu(ptr);
}

class RefdevAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex index = current_device();
    const c10::Device device(kDeviceType, index);
    if (nbytes == 0) {
      return {nullptr, nullptr, &refdev_free, device};
    }
    static const int64_t limit = configured_memory_limit();
    static const bool poison = configured_poison();
    void* ptr = c10::alloc_cpu(nbytes);
    if (poison) {
      // 0xFF bytes read as NaN for floating point dtypes: reads of
      // uninitialized memory become visible instead of silently passing.
      std::memset(ptr, 0xFF, nbytes);
    }
    auto& memory = device_memory();
    {
      std::lock_guard<std::mutex> lock(memory.mutex);
      auto& stats = memory.stats[index];
      const auto wanted = static_cast<int64_t>(nbytes);
      if (limit > 0 && stats.allocated_bytes + wanted > limit) {
        const int64_t in_use = stats.allocated_bytes;
        c10::free_cpu(ptr);
        TORCH_CHECK_WITH(
            OutOfMemoryError,
            false,
            "refdev out of memory: tried to allocate ",
            nbytes,
            " bytes on ",
            device,
            " with ",
            in_use,
            " bytes already allocated (REFDEV_MEMORY_LIMIT=",
            limit,
            ")");
      }
      memory.blocks.insert(ptr, Block{nbytes, index});
      stats.allocated_bytes += wanted;
      stats.peak_allocated_bytes =
          std::max(stats.peak_allocated_bytes, stats.allocated_bytes);
      stats.num_allocs += 1;
      stats.active_allocs += 1;
    }
    return {ptr, ptr, &refdev_free, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &refdev_free;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

RefdevAllocator g_device_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator)

// ---------------------------------------------------------------------------
// "Pinned" host memory: plain host memory that is remembered so that
// Tensor.is_pinned() / pin_memory() behave like on a real accelerator.
// ---------------------------------------------------------------------------

struct PinnedMemory {
  std::mutex mutex;
  BlockTable blocks;
};

PinnedMemory& pinned_memory() {
  static auto* memory = new PinnedMemory();
  return *memory;
}

void pinned_free(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  {
    auto& memory = pinned_memory();
    std::lock_guard<std::mutex> lock(memory.mutex);
    memory.blocks.erase(ptr);
  }
  c10::free_cpu(ptr);
}

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device device(c10::DeviceType::CPU);
    if (nbytes == 0) {
      return {nullptr, nullptr, &pinned_free, device};
    }
    void* ptr = c10::alloc_cpu(nbytes);
    {
      auto& memory = pinned_memory();
      std::lock_guard<std::mutex> lock(memory.mutex);
      memory.blocks.insert(ptr, Block{nbytes, -1});
    }
    return {ptr, ptr, &pinned_free, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &pinned_free;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedAllocator g_pinned_allocator;

// ---------------------------------------------------------------------------
// Device guard: one synchronous default stream per device.
// ---------------------------------------------------------------------------

struct RefdevEvent {
  std::chrono::steady_clock::time_point when;
  bool recorded = false;
};

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
    return default_stream(device);
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return default_stream(device);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool)
      const override {
    return default_stream(device);
  }

  c10::Stream getNewStream(c10::Device device, int) const override {
    return default_stream(device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return default_stream(stream.device());
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept
      override {
    delete static_cast<RefdevEvent*>(event);
  }

  void record(
      void** event,
      const c10::Stream& stream,
      const c10::DeviceIndex device_index,
      const c10::EventFlag) const override {
    TORCH_CHECK(
        stream.device_type() == kDeviceType,
        "refdev: cannot record an event on a ",
        stream.device_type(),
        " stream");
    TORCH_CHECK(
        device_index == -1 || device_index == stream.device_index(),
        "refdev: event device index ",
        static_cast<int>(device_index),
        " does not match the recording stream's device index ",
        static_cast<int>(stream.device_index()));
    auto* refdev_event = static_cast<RefdevEvent*>(*event);
    if (refdev_event == nullptr) {
      refdev_event = new RefdevEvent();
      *event = refdev_event;
    }
    refdev_event->when = std::chrono::steady_clock::now();
    refdev_event->recorded = true;
  }

  void block(void*, const c10::Stream&) const override {}

  bool queryEvent(void*) const override {
    return true;
  }

  bool queryStream(const c10::Stream&) const override {
    return true;
  }

  void synchronizeStream(const c10::Stream&) const override {}

  void synchronizeEvent(void*) const override {}

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    synchronize(device_index);
  }

  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&)
      const override {}

  double elapsedTime(void* start, void* end, const c10::DeviceIndex)
      const override {
    const auto* first = static_cast<const RefdevEvent*>(start);
    const auto* second = static_cast<const RefdevEvent*>(end);
    TORCH_CHECK(
        first != nullptr && second != nullptr && first->recorded &&
            second->recorded,
        "refdev: both events must be recorded before calculating elapsed time");
    return std::chrono::duration<double, std::milli>(second->when - first->when)
        .count();
  }

 private:
  static void check_type(c10::Device device) {
    TORCH_CHECK(
        device.type() == kDeviceType,
        "refdev device guard got a device of type ",
        device.type());
  }

  static c10::Stream default_stream(c10::Device device) {
    const c10::DeviceIndex index =
        device.has_index() ? device.index() : current_device();
    return c10::Stream(
        c10::Stream::DEFAULT, c10::Device(kDeviceType, index));
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
    auto& memory = pinned_memory();
    std::lock_guard<std::mutex> lock(memory.mutex);
    return memory.blocks.find_containing(data).has_value();
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    return &g_pinned_allocator;
  }

  c10::Device getDeviceFromPtr(void* data) const override {
    auto& memory = device_memory();
    std::lock_guard<std::mutex> lock(memory.mutex);
    const auto block = memory.blocks.find_containing(data);
    TORCH_CHECK(
        block.has_value(),
        "refdev: pointer ",
        data,
        " was not allocated by the refdev allocator");
    return c10::Device(kDeviceType, block->device);
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
  // All refdev work completes before the launching call returns.
  if (index != -1) {
    check_device_index(index);
  }
}

c10::Allocator* device_allocator() {
  return &g_device_allocator;
}

MemoryStats memory_stats(c10::DeviceIndex index) {
  check_device_index(index);
  auto& memory = device_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  MemoryStats stats = memory.stats[index];
  stats.limit_bytes = configured_memory_limit();
  return stats;
}

void reset_peak_memory_stats(c10::DeviceIndex index) {
  check_device_index(index);
  auto& memory = device_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  auto& stats = memory.stats[index];
  stats.peak_allocated_bytes = stats.allocated_bytes;
}

void reset_accumulated_memory_stats(c10::DeviceIndex index) {
  check_device_index(index);
  auto& memory = device_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  auto& stats = memory.stats[index];
  stats.num_allocs = 0;
  stats.num_frees = 0;
}

void resize_storage_bytes(c10::StorageImpl* storage, size_t new_nbytes) {
  TORCH_CHECK(
      storage->device_type() == kDeviceType,
      "refdev: cannot resize a storage on ",
      storage->device());
  TORCH_CHECK(
      storage->resizable(),
      "refdev: trying to resize storage that is not resizable");
  if (new_nbytes == storage->nbytes()) {
    return;
  }
  c10::DataPtr fresh;
  {
    const c10::DeviceGuard guard(storage->device());
    fresh = g_device_allocator.allocate(new_nbytes);
  }
  const size_t keep = std::min(storage->nbytes(), new_nbytes);
  if (keep > 0) {
    std::memcpy(fresh.get(), storage->data(), keep);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(new_nbytes);
}

const char* torch_built_with() noexcept {
  return REFDEV_TORCH_VERSION;
}

} // namespace refdev
