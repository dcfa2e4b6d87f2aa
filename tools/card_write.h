// `card`'s work short of printing, shared by `sparkulator card` (tools/card_cmd.cc) and the Python
// card() (python/src/api.cc), so both refuse, keep and write the same files.
//
// Errors: Status; AlreadyExists when the output exists and update is false. Nothing is printed.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "card/card.h"
#include "io/file.h"

namespace spk::cli {

struct CardRequest {
  card::CardOptions options;
  std::string output;   // the README.md to write (each bench file's chart beside it); "": none
  bool update = false;  // keep the output's prose and foreign front matter, replace the rest
};

struct WrittenCard {
  card::Card card;
  std::vector<std::string> files;  // written, charts first, the card last
};

Result<WrittenCard> WriteCard(FileSystem* fs, CardRequest request);

}  // namespace spk::cli
