#pragma once
// TFRecord framing and tf.train.Example's protobuf encoding, by hand: no TensorFlow and no
// protobuf dependency. A record is: uint64 length, uint32 masked CRC32C of those 8 bytes, the
// data, uint32 masked CRC32C of the data (little-endian). An Example is
//   Example { Features features = 1; }  Features { map<string, Feature> feature = 1; }
//   Feature { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  Int64List { repeated int64 value = 1 [packed]; }
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace feedscope::detail {

// TensorFlow's masked CRC32C: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t tfrecord_masked_crc(const void* data, std::size_t bytes) noexcept;

// The two features an image classification Example carries.
struct ExampleImage {
  std::span<const std::uint8_t> image;  // inside the parsed record
  std::int64_t label = 0;
};

// Finds `image_key` (its first bytes value) and `label_key` (its first int64 value) in a serialized
// Example. Throws std::runtime_error saying what is wrong: a malformed message (naming the byte
// offset), a feature missing, or one of another kind.
ExampleImage parse_example(std::span<const std::uint8_t> example, std::string_view image_key,
                           std::string_view label_key);

// A serialized Example with `image_key` as a one-value bytes_list and `label_key` as a one-value
// int64_list, plus any extra bytes features (e.g. image/format).
std::vector<std::uint8_t> encode_example(
    std::string_view image_key, std::span<const std::uint8_t> image, std::string_view label_key,
    std::int64_t label, const std::vector<std::pair<std::string, std::string>>& extra_bytes = {});

// `data` framed as one TFRecord record: length, its CRC, the data, its CRC.
std::vector<std::uint8_t> tfrecord_frame(std::span<const std::uint8_t> data);

}  // namespace feedscope::detail
