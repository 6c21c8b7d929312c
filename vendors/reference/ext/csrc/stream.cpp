// refdev streams and events.
//
// Each device has a default stream (id 0) and a pool of side streams (ids
// 1..kSideStreams).  The default stream is synchronous: its kernels run when
// they are launched.  A side stream is a queue: a kernel launched there reads
// refdev memory at launch, after the stream's earlier work, and its writes
// into refdev memory wait in the queue until the stream next runs (a
// synchronize of the stream, an event or the device, a query, a wait that
// needs them, or the stream's next kernel).  A reader on another stream that
// did not wait for the side stream (wait_stream / wait_event) therefore sees
// the memory as it was before: the ordering bug a real asynchronous device
// shows only sometimes, refdev shows every time.
//
// Fault switch (read once): REFDEV_STREAM_NOWAIT=1 makes a wait
// (Stream.wait_stream, Stream.wait_event, Event.wait) return without
// ordering anything, so a reader that waited still reads early.
#include "refdev.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace refdev {
namespace {

using Clock = std::chrono::steady_clock;

struct EventState {
  bool timing = false;
  bool completed = true; // an event never recorded counts as complete
  uint64_t generation = 0;
  c10::Stream stream{c10::Stream::DEFAULT, c10::Device(kDeviceType, 0)};
  Clock::time_point when{};
};

// What the guard's void* event handles point to: queued tasks hold the state.
struct EventHandle {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

struct Runtime {
  // One lock for every queue and event: a task may run another stream's work
  // (a wait), so the lock is recursive.  refdev favours simple over fast.
  std::recursive_mutex mutex;
  std::array<std::array<std::deque<std::function<void()>>, kSideStreams + 1>,
             kMaxDevices>
      queues;
  std::array<std::atomic<uint32_t>, kMaxDevices> next_side{};
};

Runtime& runtime() {
  static auto* state = new Runtime(); // leaked: used during shutdown
  return *state;
}

thread_local std::array<c10::StreamId, kMaxDevices> tls_current_stream{};

bool nowait_fault() {
  static const bool fault = [] {
    const char* raw = std::getenv("REFDEV_STREAM_NOWAIT");
    return raw != nullptr && *raw != '\0' && std::strcmp(raw, "0") != 0;
  }();
  return fault;
}

c10::DeviceIndex resolve(c10::DeviceIndex index) {
  const c10::DeviceIndex resolved = index < 0 ? current_device() : index;
  check_device_index(resolved);
  return resolved;
}

void check_stream(const c10::Stream& stream) {
  TORCH_CHECK(
      stream.device_type() == kDeviceType,
      "refdev: expected a refdev stream, got one on ",
      stream.device());
  check_device_index(stream.device_index());
  TORCH_CHECK(
      stream.id() >= 0 && stream.id() <= kSideStreams,
      "refdev: stream id ",
      stream.id(),
      " is not a refdev stream (0 is the default stream, 1 to ",
      kSideStreams,
      " the side streams)");
}

std::deque<std::function<void()>>& queue_of(const c10::Stream& stream) {
  return runtime().queues[stream.device_index()][stream.id()];
}

// Runs the queued work of `stream` until `done` holds or the queue is empty.
template <typename Done>
void run_until(const c10::Stream& stream, Done done) {
  std::lock_guard<std::recursive_mutex> lock(runtime().mutex);
  auto& queue = queue_of(stream);
  while (!done() && !queue.empty()) {
    std::function<void()> task = std::move(queue.front());
    queue.pop_front();
    task();
  }
}

void drain(const c10::Stream& stream) {
  run_until(stream, [] { return false; });
}

void complete(EventState& event) {
  run_until(event.stream, [&event] { return event.completed; });
}

EventState& state_of(void* event) {
  TORCH_CHECK(event != nullptr, "refdev: the event was never recorded");
  return *static_cast<EventHandle*>(event)->state;
}

} // namespace

c10::Stream current_stream(c10::DeviceIndex index) {
  const c10::DeviceIndex device = resolve(index);
  return c10::Stream(
      c10::Stream::UNSAFE,
      c10::Device(kDeviceType, device),
      tls_current_stream[device]);
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  check_stream(stream);
  const c10::Stream previous = current_stream(stream.device_index());
  tls_current_stream[stream.device_index()] = stream.id();
  return previous;
}

c10::Stream side_stream(c10::DeviceIndex index) {
  const c10::DeviceIndex device = resolve(index);
  const uint32_t turn = runtime().next_side[device].fetch_add(1);
  return c10::Stream(
      c10::Stream::UNSAFE,
      c10::Device(kDeviceType, device),
      static_cast<c10::StreamId>(1 + turn % kSideStreams));
}

void stream_read(c10::DeviceIndex index) {
  const c10::Stream stream = current_stream(index);
  if (stream.id() != 0) {
    drain(stream);
  }
}

bool stream_defers(c10::DeviceIndex index) {
  return current_stream(index).id() != 0;
}

void stream_write(c10::DeviceIndex index, std::function<void()> write) {
  const c10::Stream stream = current_stream(index);
  if (stream.id() == 0) {
    write();
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(runtime().mutex);
  queue_of(stream).push_back(std::move(write)); // after the stream's earlier work
}

void synchronize_stream(const c10::Stream& stream) {
  check_stream(stream);
  drain(stream);
}

bool query_stream(const c10::Stream& stream) {
  // A side stream runs when the host looks at it: a query completes it, so a
  // loop that polls until the stream is done always ends.
  synchronize_stream(stream);
  return true;
}

void synchronize_device(c10::DeviceIndex index) {
  const c10::DeviceIndex device = resolve(index);
  for (c10::StreamId id = 1; id <= kSideStreams; ++id) {
    drain(c10::Stream(
        c10::Stream::UNSAFE, c10::Device(kDeviceType, device), id));
  }
}

void event_record(
    void** event,
    const c10::Stream& stream,
    c10::DeviceIndex device_index,
    c10::EventFlag flag) {
  check_stream(stream);
  TORCH_CHECK(
      device_index == -1 || device_index == stream.device_index(),
      "refdev: event device index ",
      static_cast<int>(device_index),
      " does not match the recording stream's device index ",
      static_cast<int>(stream.device_index()));
  if (*event == nullptr) {
    *event = new EventHandle();
  }
  std::shared_ptr<EventState> state = static_cast<EventHandle*>(*event)->state;
  std::lock_guard<std::recursive_mutex> lock(runtime().mutex);
  state->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
  state->stream = stream;
  const uint64_t generation = ++state->generation;
  auto mark = [state, generation] {
    if (state->generation == generation) {
      state->completed = true;
      state->when = Clock::now();
    }
  };
  if (stream.id() == 0) {
    mark();
    return;
  }
  state->completed = false;
  queue_of(stream).push_back(std::move(mark));
}

void event_block(void* event, const c10::Stream& stream) {
  check_stream(stream);
  if (event == nullptr || nowait_fault()) {
    return; // never recorded: nothing to wait for (as on CUDA)
  }
  std::shared_ptr<EventState> state = static_cast<EventHandle*>(event)->state;
  std::lock_guard<std::recursive_mutex> lock(runtime().mutex);
  if (state->completed) {
    return;
  }
  if (stream.id() == 0) {
    complete(*state); // the default stream is the host's: it waits now
    return;
  }
  const uint64_t generation = state->generation;
  queue_of(stream).push_back([state, generation] {
    if (state->generation == generation) {
      complete(*state);
    }
  });
}

bool event_query(void* event) {
  if (event != nullptr) {
    complete(state_of(event)); // see query_stream
  }
  return true;
}

void event_synchronize(void* event) {
  if (event != nullptr) {
    complete(state_of(event));
  }
}

void event_destroy(void* event) noexcept {
  delete static_cast<EventHandle*>(event);
}

double event_elapsed_ms(void* start, void* end) {
  TORCH_CHECK(
      start != nullptr && end != nullptr,
      "refdev: both events must be recorded before calculating elapsed time");
  EventState& first = state_of(start);
  EventState& second = state_of(end);
  TORCH_CHECK(
      first.timing && second.timing,
      "refdev: both events must be created with enable_timing=True to "
      "calculate elapsed time");
  complete(first);
  complete(second);
  return std::chrono::duration<double, std::milli>(second.when - first.when)
      .count();
}

} // namespace refdev
