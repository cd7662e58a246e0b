#pragma once
// The DLPack structs (https://github.com/dmlc/dlpack, include/dlpack/dlpack.h, Apache-2.0): the
// unversioned DLManagedTensor that a PyCapsule named "dltensor" carries, the form every torch from
// 1.x to 2.x takes in torch.utils.dlpack.from_dlpack(). Only what feedscope hands out is declared;
// the layout is DLPack's ABI, unchanged since 0.2.
#include <cstdint>

namespace feedscope::dlpack {

enum DeviceType : std::int32_t { kDLCPU = 1, kDLCUDA = 2 };
enum DataTypeCode : std::uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2 };

struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};

struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements
  std::uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace feedscope::dlpack
