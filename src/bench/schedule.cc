#include "bench/schedule.h"

namespace spk::bench {

std::vector<Turn> AbbaSchedule(size_t num_arms, size_t num_blocks, bool start_reversed) {
  std::vector<Turn> turns;
  for (size_t block = 0; block < num_blocks; ++block) {
    bool reversed = (block % 2 == 1) != start_reversed;
    for (size_t k = 0; k < num_arms; ++k) {
      turns.push_back({block, reversed ? num_arms - 1 - k : k});
    }
  }
  return turns;
}

}  // namespace spk::bench
