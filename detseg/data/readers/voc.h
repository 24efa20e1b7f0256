// Implements: reading a Pascal VOC folder (Annotations/*.xml, JPEGImages/, ImageSets/Main/<split>.txt)
// into a CocoDataset, so `detseg convert voc` is "read VOC, write COCO" and training reads either.
// Boxes keep VOC's integer corners as given: COCO bbox = [xmin, ymin, xmax - xmin, ymax - ymin].
// <difficult>1</difficult> becomes CocoAnnotation::ignore, <truncated> is kept.
#pragma once

#include <string>
#include <vector>

#include "detseg/data/readers/coco.h"
#include "detseg/data/readers/label_map.h"

namespace detseg {

struct VocOptions {
  std::string split;  // ImageSets/Main/<split>.txt; empty: every Annotations/*.xml, sorted
  // Category ids and names. Empty: every class name found, sorted by name, ids 1..K.
  LabelMap label_map;
  bool check_images = true;  // error when JPEGImages/<file> is missing
};

// Reads `voc_dir`. Image ids are 1..N in list order, annotation ids 1..M. Throws Error naming the
// file (and line, for XML) on malformed XML, missing fields, unknown class, missing image.
CocoDataset read_voc(const std::string& voc_dir, const VocOptions& options = {});

// The minimal XML tree the VOC reader needs (elements and text; attributes are skipped).
struct XmlNode {
  std::string name;
  std::string text;  // concatenated character data, entities decoded, trimmed
  long line = 0;     // line of the start tag
  std::vector<XmlNode> children;

  // First child called `name`, or nullptr.
  const XmlNode* child(const std::string& name) const;
};

// Parses one XML document; throws Error "file:line: expected ..., got ..." when malformed.
XmlNode parse_xml(const std::string& text, const std::string& file);

}  // namespace detseg
