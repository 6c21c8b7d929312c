// refdev: a reference PyTorch out-of-tree backend living in host memory.
//
// Shared declarations between the runtime (device.cpp), the aten kernels
// (ops.cpp) and the Python binding (module.cpp).  Only c10 headers here so
// that the Python binding stays cheap to compile.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace c10 {
struct StorageImpl;
} // namespace c10

namespace refdev {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
// Hard upper bound for REFDEV_DEVICE_COUNT.
constexpr int kMaxDevices = 16;

// ---- device management ------------------------------------------------------
// Number of devices (env REFDEV_DEVICE_COUNT, default 2, read once).
c10::DeviceIndex device_count() noexcept;
// Thread-local current device (starts at 0 on every thread).
c10::DeviceIndex current_device() noexcept;
// Throws c10::Error for an index outside [0, device_count()).
void set_device(c10::DeviceIndex index);
void check_device_index(int64_t index);
// No-op (all work is synchronous) but validates the index; -1 means current.
void synchronize(int64_t index);

// ---- memory -----------------------------------------------------------------
struct MemoryStats {
  int64_t allocated_bytes = 0;       // bytes currently allocated
  int64_t peak_allocated_bytes = 0;  // high-water mark since last reset
  int64_t num_allocs = 0;            // allocations since start (or reset)
  int64_t num_frees = 0;             // frees since start (or reset)
  int64_t active_allocs = 0;         // live allocations
  int64_t limit_bytes = 0;           // 0: unlimited (env REFDEV_MEMORY_LIMIT)
};

// Allocator for refdev storages; allocates on the current refdev device.
c10::Allocator* device_allocator();
MemoryStats memory_stats(c10::DeviceIndex index);
void reset_peak_memory_stats(c10::DeviceIndex index);
void reset_accumulated_memory_stats(c10::DeviceIndex index);
// Grow/shrink the bytes of a refdev storage (keeps the common prefix).
void resize_storage_bytes(c10::StorageImpl* storage, size_t new_nbytes);

// ---- host fallback ------------------------------------------------------------
// How often each aten operator ran through the host (CPU) fallback.
std::vector<std::pair<std::string, int64_t>> fallback_op_counts();
void reset_fallback_op_counts();

// Torch version this extension was compiled against.
const char* torch_built_with() noexcept;

} // namespace refdev
