// Implements: a label map (class id -> name), read from a text file. Two formats are accepted:
//   - one name per line ("RBC"), ids 1, 2, 3, ... in line order; or "id name" per line ("3 WBC");
//   - the Object Detection API's pbtxt: item { id: 1 name: 'RBC' } (display_name is read too).
// Blank lines and lines starting with '#' are skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace detseg {

struct LabelMapEntry {
  int64_t id = 0;
  std::string name;
};

struct LabelMap {
  std::vector<LabelMapEntry> entries;  // in file order; ids and names unique

  // Id of `name`, or -1 when absent.
  int64_t id_of(const std::string& name) const;
  // Name of `id`, or "" when absent.
  std::string name_of(int64_t id) const;
  size_t size() const { return entries.size(); }
};

// Reads a label map; throws Error "file:line: ..." on duplicates or unparsable lines.
LabelMap read_label_map(const std::string& path);
// Parses label map text; `name` is used in error messages.
LabelMap parse_label_map(const std::string& text, const std::string& name);

}  // namespace detseg
