// A vLLM release as text ("0.33.0", "0.32.0+cpu", "v0.25.1", "0.26.1rc1.dev1049+g...", "0.32"): the
// one parser of vLLM versions, used by the module maps (vllm/vllm_module_map.h: which map
// judges a release), the plan (--vllm-version) and `check`'s version-range rules
// (check/vllm_rules.h).
//
// Values and pure functions; thread-safe. Errors: ParseVllmVersion returns Usage for text that is
// not a version.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace spk {

struct VllmVersion {
  int major = 0, minor = 0, patch = 0;
  bool prerelease = false;  // rc/dev/a/b builds come before the release of the same number
  std::string text;         // as written ("0.26.1rc1.dev1049+gf8e060271")

  // "MAJOR.MINOR.PATCH": the release a build belongs to ("0.32.0+cpu" and "0.34.0rc1" are builds of
  // 0.32.0 and 0.34.0), by which a module map is chosen.
  std::string release() const;
};

// "0.32.0", "0.32.0+cpu" (a local build label of 0.32.0), "0.26.1rc1.dev1049+g..." (a pre-release
// of 0.26.1), "v0.25.1", "0.32" (0.32.0).
Result<VllmVersion> ParseVllmVersion(std::string_view text);

// <0, 0, >0: a pre-release comes before its release; local labels are ignored.
int CompareVllmVersions(const VllmVersion& a, const VllmVersion& b);

// The same, of the releases only (a pre-release of 0.34.0 compares equal to 0.34.0).
int CompareVllmReleases(const VllmVersion& a, const VllmVersion& b);

}  // namespace spk
