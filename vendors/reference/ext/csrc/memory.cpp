// refdev memory: the PrivateUse1 allocator (a c10::DeviceAllocator, so that
// torch.accelerator's memory statistics and empty_cache reach it), its
// statistics, "pinned" host memory and storage resizing.
//
// refdev keeps no cache: a freed block goes back to the host at once, so
// reserved memory is allocated memory and empty_cache has nothing to return.
//
// Fault switch (read once): REFDEV_LEAK_ALLOC=1 makes the allocator leak:
// freed blocks are never returned and stay counted as allocated, so
// memory_allocated never comes back to its baseline.
#include "refdev.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

namespace refdev {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;

// CUDA's caching allocator serves blocks under 1 MiB from its small pool.
constexpr size_t kSmallBlock = 1 << 20;

int64_t configured_memory_limit() {
  return env_integer("REFDEV_MEMORY_LIMIT").value_or(0);
}

bool configured_poison() {
  return env_integer("REFDEV_POISON_ALLOC").value_or(0) != 0;
}

bool leak_fault() {
  static const bool fault = env_integer("REFDEV_LEAK_ALLOC").value_or(0) != 0;
  return fault;
}

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

// One device's statistics, in the shape of CUDA's allocator's: bytes and
// blocks, for all blocks and per pool.
struct DeviceCounters {
  StatArray bytes{};
  StatArray blocks{};

  void add(size_t nbytes) {
    for (const StatType type : {StatType::AGGREGATE, pool_of(nbytes)}) {
      bytes[static_cast<size_t>(type)].increase(nbytes);
      blocks[static_cast<size_t>(type)].increase(1);
    }
  }

  void remove(size_t nbytes) {
    for (const StatType type : {StatType::AGGREGATE, pool_of(nbytes)}) {
      bytes[static_cast<size_t>(type)].decrease(nbytes);
      blocks[static_cast<size_t>(type)].decrease(1);
    }
  }

  const Stat& all_bytes() const {
    return bytes[static_cast<size_t>(StatType::AGGREGATE)];
  }

  const Stat& all_blocks() const {
    return blocks[static_cast<size_t>(StatType::AGGREGATE)];
  }

  static StatType pool_of(size_t nbytes) {
    return nbytes < kSmallBlock ? StatType::SMALL_POOL : StatType::LARGE_POOL;
  }
};

struct DeviceMemory {
  std::mutex mutex;
  BlockTable blocks;
  std::array<DeviceCounters, kMaxDevices> counters{};
};

// Intentionally leaked: storages may be freed during interpreter shutdown
// after static destructors would have run.
DeviceMemory& device_memory() {
  static auto* memory = new DeviceMemory();
  return *memory;
}

void refdev_free(void* ptr) {
  if (ptr == nullptr || leak_fault()) {
    return;
  }
  auto& memory = device_memory();
  {
    std::lock_guard<std::mutex> lock(memory.mutex);
    if (auto block = memory.blocks.erase(ptr)) {
      memory.counters[block->device].remove(block->nbytes);
    }
  }
  c10::free_cpu(ptr);
}

void check_limit(const DeviceCounters& counters, size_t nbytes, c10::Device device) {
  static const int64_t limit = configured_memory_limit();
  const int64_t in_use = counters.all_bytes().current;
  TORCH_CHECK_WITH(
      OutOfMemoryError,
      limit <= 0 || in_use + static_cast<int64_t>(nbytes) <= limit,
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

class RefdevAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex index = current_device();
    const c10::Device device(kDeviceType, index);
    if (nbytes == 0) {
      return {nullptr, nullptr, &refdev_free, device};
    }
    auto& memory = device_memory();
    {
      std::lock_guard<std::mutex> lock(memory.mutex);
      check_limit(memory.counters[index], nbytes, device);
    }
    void* ptr = c10::alloc_cpu(nbytes);
    static const bool poison = configured_poison();
    if (poison) {
      // 0xFF bytes read as NaN for floating point dtypes: reads of
      // uninitialized memory become visible instead of silently passing.
      std::memset(ptr, 0xFF, nbytes);
    }
    {
      std::lock_guard<std::mutex> lock(memory.mutex);
      memory.blocks.insert(ptr, Block{nbytes, index});
      memory.counters[index].add(nbytes);
    }
    return {ptr, ptr, &refdev_free, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &refdev_free;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  bool initialized() override {
    return true;
  }

  void emptyCache(c10::MempoolId_t) override {} // nothing is cached

  // Freeing is immediate, and a side stream's queued writes own their
  // storage until they run: no block needs to wait for a stream.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(
      c10::DeviceIndex index) override {
    const DeviceCounters counters = counters_of(index);
    c10::CachingDeviceAllocator::DeviceStats stats;
    // No cache and no splitting: every block is one segment, reserved and
    // active while allocated.
    stats.allocation = stats.segment = stats.active = counters.blocks;
    stats.allocated_bytes = stats.reserved_bytes = stats.active_bytes =
        stats.requested_bytes = counters.bytes;
    return stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex index) override {
    reset_accumulated_memory_stats(index);
  }

  void resetPeakStats(c10::DeviceIndex index) override {
    reset_peak_memory_stats(index);
  }

 private:
  static DeviceCounters counters_of(c10::DeviceIndex index) {
    check_device_index(index);
    auto& memory = device_memory();
    std::lock_guard<std::mutex> lock(memory.mutex);
    return memory.counters[index];
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

} // namespace

// ---------------------------------------------------------------------------
// Public functions (refdev.h).
// ---------------------------------------------------------------------------

c10::Allocator* device_allocator() {
  return &g_device_allocator;
}

c10::Allocator* pinned_allocator() {
  return &g_pinned_allocator;
}

bool is_pinned_ptr(const void* data) {
  auto& memory = pinned_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  return memory.blocks.find_containing(data).has_value();
}

std::optional<c10::DeviceIndex> device_of_ptr(const void* data) {
  auto& memory = device_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  const auto block = memory.blocks.find_containing(data);
  if (!block.has_value()) {
    return std::nullopt;
  }
  return block->device;
}

MemoryStats memory_stats(c10::DeviceIndex index) {
  check_device_index(index);
  auto& memory = device_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  const DeviceCounters& counters = memory.counters[index];
  MemoryStats stats;
  stats.allocated_bytes = counters.all_bytes().current;
  stats.peak_allocated_bytes = counters.all_bytes().peak;
  stats.total_allocated_bytes = counters.all_bytes().allocated;
  stats.total_freed_bytes = counters.all_bytes().freed;
  stats.num_allocs = counters.all_blocks().allocated;
  stats.num_frees = counters.all_blocks().freed;
  stats.active_allocs = counters.all_blocks().current;
  stats.limit_bytes = configured_memory_limit();
  return stats;
}

void reset_peak_memory_stats(c10::DeviceIndex index) {
  check_device_index(index);
  auto& memory = device_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  for (auto* stats : {&memory.counters[index].bytes, &memory.counters[index].blocks}) {
    for (Stat& stat : *stats) {
      stat.reset_peak();
    }
  }
}

void reset_accumulated_memory_stats(c10::DeviceIndex index) {
  check_device_index(index);
  auto& memory = device_memory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  for (auto* stats : {&memory.counters[index].bytes, &memory.counters[index].blocks}) {
    for (Stat& stat : *stats) {
      stat.reset_accumulated();
    }
  }
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
  // The old bytes are freed below: queued writes into them run first.
  synchronize(storage->device().index());
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

} // namespace refdev
