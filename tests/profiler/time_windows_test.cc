// Time-window arithmetic (profiler/time_windows.h), which the GPU trace's busy, idle and sampled
// figures are made of.
#include "profiler/time_windows.h"

#include <gtest/gtest.h>

#include <vector>

namespace feedscope {
namespace {

using Windows = std::vector<TimeWindow>;

TEST(TimeWindowsTest, TheUnionSortsJoinsOverlapsAndDropsEmptyWindows) {
  const Windows any_order{{30, 40}, {0, 10}, {5, 12}, {12, 20}, {50, 50}, {70, 60}};
  EXPECT_EQ(merged_windows(any_order), (Windows{{0, 20}, {30, 40}}));
  // Back-to-back steps stay two where asked; overlapping ones are still one.
  EXPECT_EQ(merged_windows(any_order, true), (Windows{{0, 12}, {12, 20}, {30, 40}}));
  EXPECT_EQ(union_ns(any_order), 30);
  EXPECT_EQ(windows_ns({{0, 20}, {30, 40}}), 30);
  EXPECT_TRUE(merged_windows({}).empty());
}

TEST(TimeWindowsTest, SubtractingCutsHolesAndEndsAndKeepsWhatIsLeft) {
  const Windows from{{0, 100}, {200, 300}};
  EXPECT_EQ(subtract_windows(from, {{10, 20}, {90, 210}, {250, 260}}),
            (Windows{{0, 10}, {20, 90}, {210, 250}, {260, 300}}));
  EXPECT_EQ(subtract_windows(from, {}), from);
  EXPECT_TRUE(subtract_windows(from, {{-5, 400}}).empty());
}

TEST(TimeWindowsTest, IntersectingClipsEachSpanToTheWindowsItCrosses) {
  const Windows windows{{10, 20}, {30, 40}};
  // A span across both windows gives a piece of each; one between them gives none.
  EXPECT_EQ(intersect_windows({{35, 100}, {0, 15}, {21, 29}}, windows),
            (Windows{{10, 15}, {35, 40}}));
  EXPECT_EQ(intersect_windows({{0, 100}}, windows), windows);
}

TEST(TimeWindowsTest, ATimeIsCoveredFromAWindowsBeginUpToButNotAtItsEnd) {
  const Windows windows{{10, 20}, {30, 40}};
  EXPECT_FALSE(windows_cover(windows, 9));
  EXPECT_TRUE(windows_cover(windows, 10));
  EXPECT_TRUE(windows_cover(windows, 19));
  EXPECT_FALSE(windows_cover(windows, 20));
  EXPECT_FALSE(windows_cover(windows, 25)) << "between windows";
  EXPECT_TRUE(windows_cover(windows, 35));
  EXPECT_FALSE(windows_cover(windows, 40));
  EXPECT_FALSE(windows_cover({}, 0));
}

TEST(TimeWindowsTest, CoveredTimeIsCountedInsideEachWindowOnly) {
  const Windows busy = merged_windows({{0, 5}, {8, 25}, {28, 50}});
  EXPECT_EQ(covered_ns(busy, {{10, 20}, {30, 40}}), 20);
  EXPECT_EQ(covered_ns(busy, {{5, 8}}), 0) << "a gap between pieces is not busy";
  EXPECT_EQ(covered_ns(busy, {{-10, 100}}), 44);
  std::vector<TimeWindow> pieces;
  for_each_piece(busy, {3, 30}, [&](const TimeWindow& p) { pieces.push_back(p); });
  EXPECT_EQ(pieces, (Windows{{3, 5}, {8, 25}, {28, 30}}));
}

}  // namespace
}  // namespace feedscope
