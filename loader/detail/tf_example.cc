#include "loader/detail/tf_example.h"

#include <cstring>
#include <stdexcept>

#include "loader/detail/crc32c.h"

namespace feedscope::detail {

namespace {

// A protobuf message read field by field.
class Wire {
 public:
  Wire(std::span<const std::uint8_t> bytes, std::size_t base) : bytes_(bytes), base_(base) {}
  bool done() const { return at_ >= bytes_.size(); }
  std::size_t offset() const { return base_ + at_; }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= bytes_.size()) fail("a varint runs past the end");
      const std::uint8_t b = bytes_[at_++];
      v |= std::uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
    fail("a varint longer than 10 bytes");
  }
  // The next field's number and wire type.
  void tag(std::uint32_t& field, std::uint32_t& type) {
    const std::uint64_t t = varint();
    field = static_cast<std::uint32_t>(t >> 3);
    type = static_cast<std::uint32_t>(t & 7);
  }
  Wire sub() {
    const std::uint64_t n = varint();
    if (n > bytes_.size() - at_) fail("a length-delimited field of " + std::to_string(n) + " bytes runs past the end");
    Wire w(bytes_.subspan(at_, static_cast<std::size_t>(n)), base_ + at_);
    at_ += static_cast<std::size_t>(n);
    return w;
  }
  std::span<const std::uint8_t> rest() const { return bytes_.subspan(at_); }
  void skip(std::uint32_t type) {
    switch (type) {
      case 0: varint(); return;
      case 1: advance(8); return;
      case 2: sub(); return;
      case 5: advance(4); return;
      default: fail("wire type " + std::to_string(type) + " is not one an Example uses");
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("malformed tf.train.Example at byte " + std::to_string(offset()) + ": " + why);
  }

 private:
  void advance(std::size_t n) {
    if (n > bytes_.size() - at_) fail("a fixed-size field runs past the end");
    at_ += n;
  }
  std::span<const std::uint8_t> bytes_;
  std::size_t base_;
  std::size_t at_ = 0;
};

bool same(const Wire& w, std::string_view key) {
  const auto r = w.rest();
  return r.size() == key.size() && std::memcmp(r.data(), key.data(), key.size()) == 0;
}

const char* kind_name(std::uint32_t field) {
  return field == 1 ? "bytes_list" : field == 2 ? "float_list" : field == 3 ? "int64_list" : "an unknown kind";
}

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

void put_len(std::vector<std::uint8_t>& out, std::uint32_t field, std::span<const std::uint8_t> data) {
  put_varint(out, (std::uint64_t{field} << 3) | 2);
  put_varint(out, data.size());
  out.insert(out.end(), data.begin(), data.end());
}

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

std::vector<std::uint8_t> map_entry(std::string_view key, const std::vector<std::uint8_t>& feature) {
  std::vector<std::uint8_t> entry;
  put_len(entry, 1, bytes_of(key));
  put_len(entry, 2, feature);
  return entry;
}

std::vector<std::uint8_t> bytes_feature(std::span<const std::uint8_t> value) {
  std::vector<std::uint8_t> list, feature;
  put_len(list, 1, value);
  put_len(feature, 1, list);
  return feature;
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

}  // namespace

std::uint32_t tfrecord_masked_crc(const void* data, std::size_t bytes) noexcept {
  const std::uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

namespace {

// An entry of the Features map: whether its key is the image's or the label's, and its Feature.
struct FeatureEntry {
  bool is_image = false, is_label = false, has_key = false;
  Wire value;
  bool has_value = false;
};

// The image and the label of one Example, as its Features are read.
class ExampleReader {
 public:
  ExampleReader(std::string_view image_key, std::string_view label_key)
      : image_key_(image_key), label_key_(label_key) {}

  void read_features(Wire features) {
    std::uint32_t field = 0, type = 0;
    while (!features.done()) {
      features.tag(field, type);
      if (field != 1 || type != 2) {
        features.skip(type);
        continue;
      }
      const FeatureEntry e = read_entry(features.sub());
      if (!e.has_key || !e.has_value || !(e.is_image || e.is_label)) continue;
      read_feature(e);
    }
  }

  ExampleImage found() const {
    if (!image_) throw std::runtime_error("the Example has no bytes feature '" + std::string(image_key_) + "'");
    if (!label_) throw std::runtime_error("the Example has no int64 feature '" + std::string(label_key_) + "'");
    return out_;
  }

 private:
  FeatureEntry read_entry(Wire entry) const {
    FeatureEntry e{.value = Wire({}, entry.offset())};
    std::uint32_t field = 0, type = 0;
    while (!entry.done()) {
      entry.tag(field, type);
      if (field == 1 && type == 2) {
        const Wire key = entry.sub();
        e.is_image = same(key, image_key_);
        e.is_label = same(key, label_key_);
        e.has_key = true;
      } else if (field == 2 && type == 2) {
        e.value = entry.sub();
        e.has_value = true;
      } else {
        entry.skip(type);
      }
    }
    return e;
  }

  // The Feature's lists: each must be of the kind its key wants and hold a value.
  void read_feature(const FeatureEntry& e) {
    const std::string_view name = e.is_image ? image_key_ : label_key_;
    const std::uint32_t want = e.is_image ? 1 : 3;
    Wire value = e.value;
    std::uint32_t field = 0, type = 0;
    while (!value.done()) {
      value.tag(field, type);
      if (type != 2 || field < 1 || field > 3) {
        value.skip(type);
        continue;
      }
      Wire list = value.sub();
      if (field != want)
        throw std::runtime_error("feature '" + std::string(name) + "' is a " + kind_name(field) + ", not the " +
                                 kind_name(want));
      if (!read_first_value(list, e))
        throw std::runtime_error("feature '" + std::string(name) + "' holds no value");
    }
  }

  // A list's first value: the image's bytes, or the label, packed or not. False where it has none.
  bool read_first_value(Wire list, const FeatureEntry& e) {
    std::uint32_t field = 0, type = 0;
    while (!list.done()) {
      list.tag(field, type);
      if (field != 1) {
        list.skip(type);
        continue;
      }
      if (e.is_image && type == 2) {
        const Wire v = list.sub();
        out_.image = v.rest();
        image_ = true;
        return true;
      } else if (e.is_label && type == 2) {  // packed
        Wire packed = list.sub();
        if (!packed.done()) {
          out_.label = static_cast<std::int64_t>(packed.varint());
          label_ = true;
          return true;
        }
      } else if (e.is_label && type == 0) {
        out_.label = static_cast<std::int64_t>(list.varint());
        label_ = true;
        return true;
      } else {
        list.skip(type);
      }
    }
    return false;
  }

  std::string_view image_key_, label_key_;
  ExampleImage out_;
  bool image_ = false, label_ = false;
};

}  // namespace

ExampleImage parse_example(std::span<const std::uint8_t> example, std::string_view image_key,
                           std::string_view label_key) {
  ExampleReader reader(image_key, label_key);
  Wire message(example, 0);
  std::uint32_t field = 0, type = 0;
  while (!message.done()) {
    message.tag(field, type);
    if (field != 1 || type != 2) {
      message.skip(type);
      continue;
    }
    reader.read_features(message.sub());
  }
  return reader.found();
}

std::vector<std::uint8_t> encode_example(std::string_view image_key, std::span<const std::uint8_t> image,
                                         std::string_view label_key, std::int64_t label,
                                         const std::vector<std::pair<std::string, std::string>>& extra_bytes) {
  std::vector<std::uint8_t> features;
  put_len(features, 1, map_entry(image_key, bytes_feature(image)));
  {
    std::vector<std::uint8_t> packed, list, feature;
    put_varint(packed, static_cast<std::uint64_t>(label));
    put_len(list, 1, packed);
    put_len(feature, 3, list);
    put_len(features, 1, map_entry(label_key, feature));
  }
  for (const auto& [key, value] : extra_bytes) put_len(features, 1, map_entry(key, bytes_feature(bytes_of(value))));
  std::vector<std::uint8_t> example;
  put_len(example, 1, features);
  return example;
}

std::vector<std::uint8_t> tfrecord_frame(std::span<const std::uint8_t> data) {
  std::vector<std::uint8_t> out;
  out.reserve(data.size() + 16);
  const std::uint64_t length = data.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(length >> (8 * i)));
  put_u32(out, tfrecord_masked_crc(out.data(), 8));
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, tfrecord_masked_crc(data.data(), data.size()));
  return out;
}

}  // namespace feedscope::detail
