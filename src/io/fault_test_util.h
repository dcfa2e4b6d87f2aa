// Test-only: the file faults that every command converting one checkpoint into another (quantize,
// dequantize) must survive, beside the shard data its own tests fault: a full disk while writing
// config.json, the shard index or a copied file (tokenizer.json) into the output, and a read error
// at the source's config.json, index or tokenizer.json. Each must fail with an IoError whose
// message names the path, and leave nothing behind: no DST and no temporary folder beside it. Not
// compiled into any library.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/fault_injection.h"
#include "io/file.h"

namespace spk::test_util {

struct FileFault {
  FileOp op;
  std::string target;  // a path, or a file name (which also hits it inside the temporary folder)
  int err;
  std::string message;  // what the error must say
};

// The faults for a sharded source folder `src` that holds a tokenizer.json.
inline std::vector<FileFault> ConverterFileFaults(const std::string& src) {
  std::vector<FileFault> faults;
  for (std::string name : {"config.json", "model.safetensors.index.json", "tokenizer.json"}) {
    faults.push_back({FileOp::kWrite, name, ENOSPC, "disk full while writing "});
    faults.push_back({FileOp::kRead, src + "/" + name, EIO, "cannot read " + src + "/" + name});
  }
  return faults;
}

// Runs `convert(fs, dst)` with DST = `parent`/dst under each fault of ConverterFileFaults(src)
// and checks the error and that `parent` holds nothing but `keep` afterwards.
inline void ExpectEachFileFaultFailsCleanly(
    const std::string& src, const std::string& parent, const std::set<std::string>& keep,
    const std::function<Status(FileSystem*, const std::string&)>& convert) {
  for (const FileFault& fault : ConverterFileFaults(src)) {
    FaultInjectingFileSystem faulty(FileSystem::Default());
    faulty.FailOperation(fault.op, fault.target, fault.err);
    Status s = convert(&faulty, parent + "/dst");
    EXPECT_EQ(s.code(), StatusCode::kIoError) << fault.target << ": " << s.message();
    EXPECT_THAT(s.message(), ::testing::HasSubstr(fault.message)) << fault.target;
    EXPECT_THAT(s.message(),
                ::testing::HasSubstr("/" + fault.target.substr(fault.target.rfind('/') + 1)))
        << fault.target << ": " << s.message();
    auto left = FileSystem::Default()->ListDirectory(parent);
    ASSERT_TRUE(left.ok());
    EXPECT_EQ(std::set<std::string>(left->begin(), left->end()), keep) << fault.target;
  }
}

}  // namespace spk::test_util
