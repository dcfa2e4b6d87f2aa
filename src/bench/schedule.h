// Counterbalanced order of arms: ABBA blocks (for three arms ABC CBA ...), so that drift and
// warm-up effects hit every arm alike. Each block runs every arm once; within an arm's turn every
// cell (prompt length) runs once. Alternate `start_reversed` between machines. Ownership: values.
// Thread safety: pure. Error policy: none needed.
#pragma once

#include <cstddef>
#include <vector>

namespace spk::bench {

struct Turn {
  size_t block = 0;
  size_t arm = 0;
};

std::vector<Turn> AbbaSchedule(size_t num_arms, size_t num_blocks, bool start_reversed = false);

}  // namespace spk::bench
