#include "model/global_scale_sets.h"
#include "quant/stored_names.h"

#include <array>

namespace spk {
namespace {

// A fused set: the path its members' module path ends with, the members' leaf names, and the
// key's leaf.
struct FusedSet {
  std::array<std::string_view, 2> parents;  // "" entries unused; an empty first entry: any
  std::array<std::string_view, 3> members;
  std::string_view key_leaf;
};

constexpr std::array<FusedSet, 4> kSets = {{
    {{"attn", "attention"}, {"q_proj", "k_proj", "v_proj"}, "{q,k,v}_proj"},
    {{"attn", "attention"}, {"wq_a", "wkv_a_with_mqa", ""}, "{wq_a,wkv_a_with_mqa}"},
    {{"mlp", ""}, {"gate_proj", "up_proj", ""}, "{gate,up}_proj"},
    {{"", ""}, {"w1", "w3", ""}, "{w1,w3}"},
}};

}  // namespace

std::string GlobalScaleSetKey(std::string_view weight_name) {
  if (!weight_name.ends_with(kWeightSuffix)) return std::string(weight_name);
  const std::string_view module = weight_name.substr(0, weight_name.size() - kWeightSuffix.size());
  for (const FusedSet& set : kSets) {
    for (std::string_view member : set.members) {
      if (member.empty() || !module.ends_with(member)) continue;
      const std::string_view parent = module.substr(0, module.size() - member.size());
      // The reference's patterns: ".*(attn|attention)\.q_proj", ".*mlp\.gate_proj", ".*w1".
      bool parent_ok = set.parents[0].empty();
      for (std::string_view p : set.parents) {
        if (!p.empty() && parent.ends_with(std::string(p) + ".")) parent_ok = true;
      }
      if (parent_ok)
        return std::string(parent) + std::string(set.key_leaf) + std::string(kWeightSuffix);
    }
  }
  return std::string(weight_name);
}

}  // namespace spk
