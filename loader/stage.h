#pragma once
// The fixed stage names of DESIGN.md's pipeline model, shared by spans, reports, metrics and the
// diagnosis.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace feedscope {

enum class Stage : std::uint8_t { read, decode, transform, collate, h2d, wait, step };
inline constexpr int kStageCount = 7;
inline constexpr std::array<std::string_view, kStageCount> kStageNames = {
    "read", "decode", "transform", "collate", "h2d", "wait", "step"};

constexpr std::string_view stage_name(Stage stage) {
  return kStageNames[static_cast<std::size_t>(stage)];
}

constexpr std::optional<Stage> stage_from_name(std::string_view name) {
  for (int i = 0; i < kStageCount; ++i)
    if (kStageNames[static_cast<std::size_t>(i)] == name) return static_cast<Stage>(i);
  return std::nullopt;
}

// Stages that run on loader workers (or on the training thread when num_workers is 0).
constexpr bool is_worker_stage(Stage stage) {
  return stage == Stage::read || stage == Stage::decode || stage == Stage::transform ||
         stage == Stage::collate;
}

}  // namespace feedscope
