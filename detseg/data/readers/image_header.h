// Implements: image width and height read from a file's header, without decoding (torch-free, so
// the annotation readers can use it: YOLO labels are normalised to the image size).
#pragma once

#include <cstdint>
#include <string>

namespace detseg {

// Width and height from a JPEG, PNG, BMP or PNM header; false for other formats or a header too
// short to say.
bool image_header_size(const std::string& bytes, int64_t& width, int64_t& height);

// The EXIF Orientation tag (TIFF tag 0x0112, 1..8) of a JPEG (the first APP1 "Exif" segment before
// the scan) or a PNG (its eXIf chunk before the image data), as PIL's ImageOps.exif_transpose and
// OpenCV read it; 1 (upright) when there is none or it is out of range. 5..8 swap width and height:
// detseg turns every image upright before anything else sees it (image_codec.h).
int exif_orientation(const std::string& bytes);

}  // namespace detseg
