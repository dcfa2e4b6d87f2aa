// `card`'s options and its work short of printing, shared by `sparkulator card`
// (tools/card_cmd.cc) and the Python card() (python/src/api.cc), so both take the same options
// (one option row each, tools/option_table.h) and refuse, keep and write the same files.
//
// Errors: Status; AlreadyExists when the output exists and update is false. Nothing is printed.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "card/card.h"
#include "io/file.h"
#include "option_table.h"

namespace spk::cli {

// The card's options and where to write it: what card's option rows set.
struct CardRequest : card::CardOptions {
  std::string output;   // the README.md to write (each bench file's chart beside it); "": none
  bool update = false;  // keep the output's prose and foreign front matter, replace the rest
};

struct WrittenCard {
  card::Card card;
  std::vector<std::string> files;  // written, charts first, the card last
};

Result<WrittenCard> WriteCard(FileSystem* fs, CardRequest request);

std::span<const OptionRow<CardRequest>> CardOptionRows();

}  // namespace spk::cli
