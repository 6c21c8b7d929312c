// torch_refdev._C: the Python binding of the refdev runtime.
//
// Importing this module loads the shared library, whose static initializers
// register the refdev allocator, device guard, hooks and aten kernels for the
// PrivateUse1 dispatch key.  It uses the plain CPython API (no pybind11) to
// keep the extension small and quick to build.
#include <Python.h>

#include "refdev.h"

#include <c10/util/Exception.h>

#include <exception>

namespace {

// Runs `fn`, turning C++ exceptions into Python exceptions.
template <typename Fn>
PyObject* guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const c10::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

bool parse_index(PyObject* arg, long* index) {
  if (!PyLong_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "refdev: device index must be an int");
    return false;
  }
  *index = PyLong_AsLong(arg);
  return !(*index == -1 && PyErr_Occurred());
}

c10::DeviceIndex checked_index(long index) {
  refdev::check_device_index(index);
  return static_cast<c10::DeviceIndex>(index);
}

bool set_item(PyObject* dict, const char* key, long long value) {
  PyObject* number = PyLong_FromLongLong(value);
  if (number == nullptr) {
    return false;
  }
  const int rc = PyDict_SetItemString(dict, key, number);
  Py_DECREF(number);
  return rc == 0;
}

PyObject* py_device_count(PyObject*, PyObject*) {
  return PyLong_FromLong(refdev::device_count());
}

PyObject* py_current_device(PyObject*, PyObject*) {
  return PyLong_FromLong(refdev::current_device());
}

PyObject* py_set_device(PyObject*, PyObject* arg) {
  long index = 0;
  if (!parse_index(arg, &index)) {
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    refdev::set_device(checked_index(index));
    Py_RETURN_NONE;
  });
}

PyObject* py_synchronize(PyObject*, PyObject* arg) {
  long index = 0;
  if (!parse_index(arg, &index)) {
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    refdev::synchronize(index);
    Py_RETURN_NONE;
  });
}

PyObject* py_memory_stats(PyObject*, PyObject* arg) {
  long index = 0;
  if (!parse_index(arg, &index)) {
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    const refdev::MemoryStats stats = refdev::memory_stats(checked_index(index));
    PyObject* dict = PyDict_New();
    if (dict == nullptr) {
      return nullptr;
    }
    if (!set_item(dict, "allocated_bytes", stats.allocated_bytes) ||
        !set_item(dict, "peak_allocated_bytes", stats.peak_allocated_bytes) ||
        !set_item(dict, "num_allocs", stats.num_allocs) ||
        !set_item(dict, "num_frees", stats.num_frees) ||
        !set_item(dict, "active_allocs", stats.active_allocs) ||
        !set_item(dict, "total_allocated_bytes", stats.total_allocated_bytes) ||
        !set_item(dict, "total_freed_bytes", stats.total_freed_bytes) ||
        !set_item(dict, "limit_bytes", stats.limit_bytes)) {
      Py_DECREF(dict);
      return nullptr;
    }
    return dict;
  });
}

PyObject* py_reset_peak_memory_stats(PyObject*, PyObject* arg) {
  long index = 0;
  if (!parse_index(arg, &index)) {
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    refdev::reset_peak_memory_stats(checked_index(index));
    Py_RETURN_NONE;
  });
}

PyObject* py_reset_accumulated_memory_stats(PyObject*, PyObject* arg) {
  long index = 0;
  if (!parse_index(arg, &index)) {
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    refdev::reset_accumulated_memory_stats(checked_index(index));
    Py_RETURN_NONE;
  });
}

PyObject* py_fallback_op_counts(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* {
    PyObject* dict = PyDict_New();
    if (dict == nullptr) {
      return nullptr;
    }
    for (const auto& entry : refdev::fallback_op_counts()) {
      if (!set_item(dict, entry.first.c_str(), entry.second)) {
        Py_DECREF(dict);
        return nullptr;
      }
    }
    return dict;
  });
}

PyObject* py_reset_fallback_op_counts(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* {
    refdev::reset_fallback_op_counts();
    Py_RETURN_NONE;
  });
}

PyObject* py_torch_built_with(PyObject*, PyObject*) {
  return PyUnicode_FromString(refdev::torch_built_with());
}

PyMethodDef methods[] = {
    {"device_count", py_device_count, METH_NOARGS, "Number of refdev devices."},
    {"current_device", py_current_device, METH_NOARGS,
     "Index of the calling thread's current refdev device."},
    {"set_device", py_set_device, METH_O, "Set the current refdev device."},
    {"synchronize", py_synchronize, METH_O,
     "Complete the queued work of every stream of a device (-1: current)."},
    {"memory_stats", py_memory_stats, METH_O,
     "Allocator statistics of one device, as a dict."},
    {"reset_peak_memory_stats", py_reset_peak_memory_stats, METH_O,
     "Reset the peak allocated bytes of a device to the current value."},
    {"reset_accumulated_memory_stats", py_reset_accumulated_memory_stats,
     METH_O, "Reset the allocation/free counters of a device."},
    {"fallback_op_counts", py_fallback_op_counts, METH_NOARGS,
     "{aten operator: number of calls run through the host fallback}."},
    {"reset_fallback_op_counts", py_reset_fallback_op_counts, METH_NOARGS,
     "Clear the host fallback counters."},
    {"torch_built_with", py_torch_built_with, METH_NOARGS,
     "torch version this extension was compiled against."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "torch_refdev._C",
    "refdev runtime binding",
    -1,
    methods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

} // namespace

PyMODINIT_FUNC PyInit__C() {
  return PyModule_Create(&module_def);
}
