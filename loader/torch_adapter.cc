#include "loader/torch_adapter.h"

#include <cstring>

#include <torch/torch.h>

namespace feedscope {

namespace {

std::string shape_text(at::IntArrayRef sizes) {
  std::string out;
  for (std::size_t i = 0; i < sizes.size(); ++i) out += (i ? "x" : "") + std::to_string(sizes[i]);
  return out.empty() ? "scalar" : out;
}

std::optional<DType> dtype_of(const at::Tensor& t) {
  if (t.scalar_type() == at::kFloat) return DType::float32;
  if (t.scalar_type() == at::kByte) return DType::uint8;
  return std::nullopt;
}

at::ScalarType scalar_type(DType dtype) { return dtype == DType::uint8 ? at::kByte : at::kFloat; }

}  // namespace

namespace detail {

SampleSpec spec_of_tensor(const at::Tensor& data, const std::string& what) {
  if (!data.defined()) throw DatasetError(what + ": the example's data tensor is undefined");
  const std::optional<DType> dtype = dtype_of(data);
  if (!dtype)
    throw DatasetError(what + ": data of dtype " + std::string(c10::toString(data.scalar_type())) +
                       " is not supported; allowed: float32, uint8");
  if (data.dim() < 1 || data.dim() > 4 || data.numel() == 0)
    throw DatasetError(what + ": data of shape " + shape_text(data.sizes()) +
                       " is not supported; allowed: 1 to 4 dimensions, not empty");
  return SampleSpec{std::vector<std::int64_t>(data.sizes().begin(), data.sizes().end()), *dtype};
}

std::int64_t collate_example(const at::Tensor& data, const at::Tensor& target,
                             const SampleSpec& spec, std::size_t index, const std::string& source,
                             std::span<std::byte> out, LoadContext& ctx) {
  if (!data.defined() || dtype_of(data) != spec.dtype ||
      !std::equal(data.sizes().begin(), data.sizes().end(), spec.shape.begin(), spec.shape.end()))
    throw SampleError(index, source,
                      "data is " + (data.defined() ? shape_text(data.sizes()) + " " +
                                                         std::string(c10::toString(data.scalar_type()))
                                                   : std::string("undefined")) +
                          "; every sample must be " + spec.to_string() + " like sample 0");
  if (!target.defined() || target.numel() != 1 ||
      !at::isIntegralType(target.scalar_type(), /*includeBool=*/false))
    throw SampleError(index, source,
                      "target must be one integer class label, not " +
                          (target.defined() ? shape_text(target.sizes()) + " " +
                                                  std::string(c10::toString(target.scalar_type()))
                                            : std::string("undefined")));
  const std::int64_t label = target.item<std::int64_t>();
  if (label < 0) throw SampleError(index, source, "label " + std::to_string(label) + " is negative");
  ScopedSpan span(ctx.spans, ctx.role, Stage::collate, ctx.batch);
  const at::Tensor cpu = data.device().is_cpu() ? data.contiguous() : data.cpu().contiguous();
  std::memcpy(out.data(), cpu.data_ptr(), spec.bytes());
  return label;
}

}  // namespace detail

BatchTensors batch_tensors(Batch batch, const SampleSpec& spec) {
  auto owner = std::make_shared<Batch>(std::move(batch));
  std::vector<std::int64_t> sizes{owner->size};
  sizes.insert(sizes.end(), spec.shape.begin(), spec.shape.end());
  // Each deleter holds the batch, so the slab returns to the pool with the last tensor.
  BatchTensors out;
  out.data = torch::from_blob(owner->data, sizes, [owner](void*) {},
                              torch::TensorOptions().dtype(scalar_type(spec.dtype)));
  out.labels = torch::from_blob(owner->labels, {owner->size}, [owner](void*) {},
                                torch::TensorOptions().dtype(torch::kInt64));
  return out;
}

}  // namespace feedscope
