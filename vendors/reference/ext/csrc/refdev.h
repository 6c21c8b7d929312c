// refdev: a reference PyTorch out-of-tree backend living in host memory.
//
// Shared declarations between the runtime (device.cpp), the aten kernels
// (ops.cpp) and the Python binding (module.cpp).  Only c10 headers here so
// that the Python binding stays cheap to compile.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace c10 {
struct StorageImpl;
enum class EventFlag;
} // namespace c10

namespace refdev {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
// Hard upper bound for REFDEV_DEVICE_COUNT.
constexpr int kMaxDevices = 16;
// Side streams per device (stream ids 1..kSideStreams; 0 is the default).
constexpr int kSideStreams = 8;

// A non-negative integer from the environment; nullopt when unset or invalid
// (an invalid value is reported on stderr).
std::optional<long long> env_integer(const char* name);

// ---- device management ------------------------------------------------------
// Number of devices (env REFDEV_DEVICE_COUNT, default 2, read once).
c10::DeviceIndex device_count() noexcept;
// Thread-local current device (starts at 0 on every thread).
c10::DeviceIndex current_device() noexcept;
// Throws c10::Error for an index outside [0, device_count()).
void set_device(c10::DeviceIndex index);
void check_device_index(int64_t index);
// Completes every stream's queued work on a device; -1 means current.
void synchronize(int64_t index);

// ---- memory -----------------------------------------------------------------
struct MemoryStats {
  int64_t allocated_bytes = 0;       // bytes currently allocated
  int64_t peak_allocated_bytes = 0;  // high-water mark since last reset
  int64_t num_allocs = 0;            // allocations since start (or reset)
  int64_t num_frees = 0;             // frees since start (or reset)
  int64_t active_allocs = 0;         // live allocations
  int64_t total_allocated_bytes = 0; // bytes allocated since start (or reset)
  int64_t total_freed_bytes = 0;     // bytes freed since start (or reset)
  int64_t limit_bytes = 0;           // 0: unlimited (env REFDEV_MEMORY_LIMIT)
};

// Allocator for refdev storages; allocates on the current refdev device.
c10::Allocator* device_allocator();
// "Pinned" host memory (plain host memory refdev remembers).
c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* data);
// The device of a refdev block holding `data`; nullopt for other memory.
std::optional<c10::DeviceIndex> device_of_ptr(const void* data);
MemoryStats memory_stats(c10::DeviceIndex index);
void reset_peak_memory_stats(c10::DeviceIndex index);
void reset_accumulated_memory_stats(c10::DeviceIndex index);
// Grow/shrink the bytes of a refdev storage (keeps the common prefix).
void resize_storage_bytes(c10::StorageImpl* storage, size_t new_nbytes);

// ---- streams and events (stream.cpp) ----------------------------------------
// The default stream runs work at launch; a side stream queues the writes of
// its kernels until it next runs (stream.cpp says when).
c10::Stream current_stream(c10::DeviceIndex index); // -1: current device
c10::Stream exchange_stream(const c10::Stream& stream);
c10::Stream side_stream(c10::DeviceIndex index); // the pool's next, in turn
// A kernel calls stream_read before it reads refdev memory of device `index`
// (the current stream's queued work completes first) and hands each store
// into that memory to stream_write (run now, or queued on a side stream; the
// function must own what it touches).  stream_defers: whether it is queued.
void stream_read(c10::DeviceIndex index);
bool stream_defers(c10::DeviceIndex index);
void stream_write(c10::DeviceIndex index, std::function<void()> write);
void synchronize_stream(const c10::Stream& stream);
bool query_stream(const c10::Stream& stream);
void synchronize_device(c10::DeviceIndex index);
void event_record(
    void** event,
    const c10::Stream& stream,
    c10::DeviceIndex device_index,
    c10::EventFlag flag);
void event_block(void* event, const c10::Stream& stream);
bool event_query(void* event);
void event_synchronize(void* event);
void event_destroy(void* event) noexcept;
double event_elapsed_ms(void* start, void* end);

// ---- host fallback ------------------------------------------------------------
// How often each aten operator ran through the host (CPU) fallback.
std::vector<std::pair<std::string, int64_t>> fallback_op_counts();
void reset_fallback_op_counts();

// Torch version this extension was compiled against.
const char* torch_built_with() noexcept;

} // namespace refdev
