// Implements: image width and height read from a file's header, without decoding (torch-free, so
// the annotation readers can use it: YOLO labels are normalised to the image size).
#pragma once

#include <cstdint>
#include <string>

namespace detseg {

// Width and height from a JPEG, PNG, BMP or PNM header; false for other formats or a header too
// short to say.
bool image_header_size(const std::string& bytes, int64_t& width, int64_t& height);

}  // namespace detseg
