// ShardStashCache: a shard's stash is taken by one task at a time, kept
// within the byte bound (least recently kept dropped first), and an empty
// or oversized stash is not kept.
#include "core/pipeline/shard_stash_cache.h"

#include <string>

#include "gtest/gtest.h"

namespace quant {
namespace {

// A stash of `chunks` residual chunks of 4 × 4 floats (64 bytes each).
ShardRoundStash StashOf(int chunks, float value) {
  ShardRoundStash stash;
  for (int i = 0; i < chunks; ++i) {
    stash.residual.push_back(RowMatrixF::Constant(4, 4, value));
  }
  stash.residual_weights = 7;
  return stash;
}

TEST(ShardStashCacheTest, TakeRemovesAndPutKeepsWithinTheBound) {
  ShardStashCache cache(/*max_bytes=*/3 * 64);
  const std::string a = ShardStashCache::Key("job-1", "/w", 2, true, 0);
  const std::string b = ShardStashCache::Key("job-1", "/w", 2, true, 1);
  const std::string c = ShardStashCache::Key("job-1", "/w", 2, false, 0);
  const std::string other_job = ShardStashCache::Key("job-2", "/w", 2, true, 0);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, other_job);
  EXPECT_EQ(cache.Take(a).bytes(), 0) << "nothing kept yet";

  cache.Put(a, StashOf(1, 1.0f));
  cache.Put(b, StashOf(2, 2.0f));
  EXPECT_EQ(cache.bytes(), 3 * 64);
  EXPECT_EQ(cache.entries(), 2);
  // Another task of the same shard gets it, once.
  ShardRoundStash taken = cache.Take(a);
  ASSERT_EQ(taken.residual.size(), 1u);
  EXPECT_EQ(taken.residual[0](0, 0), 1.0f);
  EXPECT_EQ(taken.residual_weights, 7u);
  EXPECT_EQ(cache.Take(a).bytes(), 0);
  EXPECT_EQ(cache.bytes(), 2 * 64);

  // Over the bound: the least recently kept (b) goes.
  cache.Put(c, StashOf(2, 3.0f));
  EXPECT_EQ(cache.entries(), 1);
  EXPECT_EQ(cache.Take(b).bytes(), 0);
  EXPECT_EQ(cache.Take(c).residual.size(), 2u);
  EXPECT_EQ(cache.bytes(), 0);

  // Putting a key again replaces its entry.
  cache.Put(a, StashOf(1, 1.0f));
  cache.Put(a, StashOf(2, 4.0f));
  EXPECT_EQ(cache.entries(), 1);
  EXPECT_EQ(cache.bytes(), 2 * 64);
  EXPECT_EQ(cache.Take(a).residual[0](0, 0), 4.0f);

  // Empty stashes and ones larger than the bound are not kept.
  cache.Put(a, ShardRoundStash());
  cache.Put(b, StashOf(4, 5.0f));
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(ShardStashCacheTest, ABoundOfZeroKeepsNothing) {
  ShardStashCache cache(0);
  cache.Put("k", StashOf(1, 1.0f));
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_EQ(cache.Take("k").bytes(), 0);
}

}  // namespace
}  // namespace quant
