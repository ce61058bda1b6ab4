// fuzz_data: the Darknet data readers of src/data/darknet_data.hpp. The first byte picks
// the reader, the second the class count; the rest is the file:
//   0  load_data_config: a .data file, then (after fuzz::kSeparator) the names file it may
//      name as names.txt and the list it may name as train.txt; then read_list of its
//      train= list and label_path of every entry, as `train --data` does
//   1  read_list, and label_path of every entry
//   2  read_labels with `classes` classes
//   3  load_data_config of a classifier's .data (labels= in place of names=), then
//      class_in_path of every entry of its train= list, as `train --data` checks them
// A tt::Error is the correct answer to a bad file; anything else is a finding.
#include <cstdint>
#include <string_view>

#include "data/darknet_data.hpp"
#include "fuzz_util.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int mode = data[0] % 4;
  const int classes = data[1];
  const std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);
  const fuzz::Scratch& s = fuzz::scratch();
  volatile size_t sink = 0;
  try {
    if (mode == 0 || mode == 3) {
      const auto parts = fuzz::split(in, 3);
      // A .data file may name any path: not devices and kernel files that never end.
      for (std::string_view dev : {"/dev", "/proc", "/sys"})
        if (parts[0].find(dev) != std::string_view::npos) return 0;
      s.write("names.txt", parts[1]);
      s.write("train.txt", parts[2]);
      const tt::DataKind kind = mode == 0 ? tt::DataKind::Detection : tt::DataKind::Classification;
      const tt::DataConfig d = tt::load_data_config(s.write("fuzz.data", parts[0]), kind);
      sink = sink + d.class_names.size() + size_t(d.classes);
      // Only the lists this input wrote: a .data file may name any path on the machine.
      if (d.train == s.dir() + "/train.txt")
        for (const std::string& p : tt::read_list(d.train)) {
          if (mode == 0) {
            sink = sink + tt::label_path(p).size();
          } else {
            try {  // a path with no label or two is an error, the others go on
              sink = sink + size_t(tt::class_in_path(p, d.class_names) + 1);
            } catch (const tt::Error&) {
            }
          }
        }
    } else if (mode == 1) {
      for (const std::string& p : tt::read_list(s.write("list.txt", in))) sink = sink + tt::label_path(p).size();
    } else {
      for (const tt::TruthBox& b : tt::read_labels(s.write("labels.txt", in), classes))
        sink = sink + size_t(b.cls) + size_t(b.w > 0);
    }
  } catch (const tt::Error&) {
  }
  return 0;
}
