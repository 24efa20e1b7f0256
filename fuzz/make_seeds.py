#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora and the config dictionary into a build folder.

Seeds are small excerpts of the shared data sets (../shared/data, ../shared/coco_cases) and of the
repository's configs, made at build time so the repository carries none of them; synthetic label
PNGs are written with zlib alone. Standard library only.
    fuzz/make_seeds.py OUT_DIR REPO_ROOT SHARED_DIR
"""
import json
import os
import re
import struct
import sys
import zlib

SEP = "\n@@@@\n"  # fuzz_common.h kSeparator


def write(out, harness, name, data):
    folder = os.path.join(out, "seeds", harness)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"))


def rle_string(counts):
    """pycocotools' compressed RLE string (rle.cpp rle_to_string)."""
    out = []
    for i, c in enumerate(counts):
        x = c - counts[i - 2] if i > 2 else c
        more = True
        while more:
            ch = x & 0x1F
            x >>= 5
            more = x != -1 if ch & 0x10 else x != 0
            if more:
                ch |= 0x20
            out.append(chr(ch + 48))
    return "".join(out)


def coco_excerpt(data, image_ids, max_polygon=40):
    images = [im for im in data["images"] if im["id"] in image_ids]
    anns = [a for a in data["annotations"] if a["image_id"] in image_ids]
    for a in anns:  # long polygons add bytes, not new code paths
        if isinstance(a.get("segmentation"), list):
            a["segmentation"] = [p[:max_polygon] if len(p) > max_polygon else p for p in a["segmentation"]]
    used = {a["category_id"] for a in anns}
    cats = [c for c in data["categories"] if c["id"] in used] or data["categories"][:1]
    slim_images = [{k: im[k] for k in ("id", "file_name", "width", "height") if k in im} for im in images]
    return {"images": slim_images, "categories": cats, "annotations": anns}


def coco_seeds(out, shared):
    coco = json.load(open(os.path.join(shared, "data/coco128/annotations/instances_val2017.json")))
    by_image = {}
    for a in coco["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    crowd_images = [a["image_id"] for a in coco["annotations"] if a["iscrowd"]]
    few = sorted((len(v), k) for k, v in by_image.items())
    picks = [[few[0][1]], [few[1][1], few[2][1]], [crowd_images[0]], [few[10][1], few[11][1], few[12][1]]]
    picks.append([im["id"] for im in coco["images"] if im["id"] not in by_image][:1] + [few[3][1]])
    for i, ids in enumerate(picks):
        write(out, "coco_gt", "coco128_%d.json" % i, dumps(coco_excerpt(coco, set(ids))))
    # The crowd mask as a compressed string, and every polygon as a box-like 4-number list.
    crowd = coco_excerpt(coco, {crowd_images[0]})
    for a in crowd["annotations"]:
        if isinstance(a["segmentation"], dict):
            a["segmentation"]["counts"] = rle_string(a["segmentation"]["counts"])
    write(out, "coco_gt", "coco128_rle_string.json", dumps(crowd))

    case = os.path.join(shared, "coco_cases/case_small")
    gt = json.load(open(os.path.join(case, "gt.json")))
    dt = json.load(open(os.path.join(case, "dt.json")))
    ids = sorted({a["image_id"] for a in gt["annotations"]})
    for i, chosen in enumerate([ids[:2], ids[5:9]]):
        g = coco_excerpt(gt, set(chosen))
        g["categories"] = gt["categories"]
        d = [r for r in dt if r["image_id"] in chosen][:40]
        write(out, "coco_gt", "case_small_%d.json" % i, dumps(g))
        for j, options in enumerate(["", "per-class json", "agnostic threads"]):
            write(out, "coco_eval_pair", "case_small_%d_%d" % (i, j),
                  dumps(g) + SEP + dumps(d) + (SEP + options if options else ""))
    # segm: detections made from the ground truth's own masks, shifted scores.
    for i, ids_ in enumerate([{crowd_images[0]}, {picks[1][0], picks[1][1]}]):
        g = coco_excerpt(coco, ids_)
        d = [{"image_id": a["image_id"], "category_id": a["category_id"], "segmentation": a["segmentation"],
              "score": round(0.3 + 0.07 * k, 3)} for k, a in enumerate(g["annotations"])]
        write(out, "coco_eval_pair", "segm_%d" % i, dumps(g) + SEP + dumps(d) + SEP + "segm per-class json threads")


def voc_seeds(out, shared):
    folder = os.path.join(shared, "data/bccd/BCCD/Annotations")
    names = sorted(os.listdir(folder))
    # Two files with zero-area boxes (the data set's known defects) and a few ordinary ones.
    chosen = ["BloodImage_00338.xml", "BloodImage_00343.xml"] + names[:4]
    for n in chosen:
        write(out, "voc_xml", n, open(os.path.join(folder, n), "rb").read())
    xml = open(os.path.join(folder, names[0])).read()
    write(out, "voc_xml", "with_labels.xml", xml + SEP + "RBC\nWBC\nPlatelets\n")
    write(out, "voc_xml", "with_numbered_labels.xml", xml + SEP + "# ids\n3 RBC\n1 WBC\n2 Platelets\n")
    write(out, "voc_xml", "with_pbtxt.xml",
          xml + SEP + "item {\n  id: 1\n  name: 'RBC'\n}\nitem { id: 2 name: \"WBC\" display_name: 'W' }\n"
          "item {\n  id: 3\n  name: 'Platelets'\n}\n")


def alias_bomb(flow=False, levels=9):
    """"Billion laughs": each anchor a list of 9 aliases of the one before (9^9 nodes in 300 bytes)."""
    names = "abcdefghijklmnopqrstuvwxyz"[:levels]
    lists = ["&a [" + ",".join("x" * 9) + "]"]
    lists += ["&%s [%s]" % (n, ",".join(["*" + names[i]] * 9)) for i, n in enumerate(names[1:])]
    if flow:
        return "[" + ", ".join(lists) + "]"
    return "".join("%s: %s\n" % (n, body) for n, body in zip(names, lists))


def config_seeds(out, root):
    folder = os.path.join(root, "configs/demo")
    overrides = ["train.batch_size=8\ntrain_input.void_values=[11]",
                 "model.faster_rcnn.first_stage_anchor_sizes=[16, 32, 64, 128, 256]\ndevice=cuda:1",
                 "train.gradient_multipliers=[\"bias=2\"]\ntrain.fine_tune.scope_map=[\"a=b\"]\nmodel.type=mask_rcnn"]
    for i, name in enumerate(sorted(f for f in os.listdir(folder) if f.endswith(".yaml"))):
        text = open(os.path.join(folder, name)).read()
        write(out, "config_yaml", name, text)
        write(out, "config_yaml", name + ".set", text + SEP + overrides[i % len(overrides)])
    # Hostile shapes (kept small: max_len is 8 kB): aliases that expand past kMaxYamlNodes, in the
    # file and in a --set value, and a long list (the size limit itself is a test in
    # tests/config/test_config_limits.cpp: a 1 MiB seed would only slow every mutation down).
    write(out, "config_yaml", "alias_bomb.yaml", alias_bomb())
    write(out, "config_yaml", "alias_bomb_in_set.yaml",
          "model: {num_classes: 3}\n" + SEP + "model.pixel_mean=" + alias_bomb(flow=True))
    write(out, "config_yaml", "long_list.yaml",
          "model:\n  num_classes: 3\n  aspect_ratios:\n" + "    - 1.0\n" * 700)
    # Every key of the config as a dictionary entry (from the one declaration in config.cpp).
    source = open(os.path.join(root, "detseg/config/config.cpp")).read()
    keys = sorted(set(re.findall(r'v\.(?:field|section)\("([a-z0-9_]+)"', source)))
    with open(os.path.join(out, "dict", "config_keys.dict"), "w") as f:
        for k in keys:
            f.write('"%s:"\n"%s="\n' % (k, k))


def png(width, height, bit_depth, color_type, rows, palette=None):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = b"".join(b"\x00" + r for r in rows)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0))
    if palette:
        out += chunk(b"PLTE", palette)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def png_seeds(out, shared):
    folder = os.path.join(shared, "data/camvid/CamVid/valannot")
    for n in sorted(os.listdir(folder))[:4]:
        # byte 0: num_classes, byte 1: void value (fuzz_seg_png.cpp): CamVid's 11 classes, void 11.
        write(out, "seg_png", n, b"\x0b\x0b" + open(os.path.join(folder, n), "rb").read())
    gray = [bytes((x + y) % 12 for x in range(7)) for y in range(5)]
    write(out, "seg_png", "gray8.png", b"\x0c\xff" + png(7, 5, 8, 0, gray))
    write(out, "seg_png", "gray1.png", b"\x02\xff" + png(9, 3, 1, 0, [b"\xaa\x80"] * 3))
    write(out, "seg_png", "palette.png", b"\x04\x03" + png(4, 2, 8, 3, [b"\x00\x01\x02\x03"] * 2, b"\x00" * 12))
    write(out, "seg_png", "gray16.png", b"\x00\xff" + png(2, 2, 16, 0, [b"\x00\x01\x00\x02"] * 2))
    write(out, "seg_png", "rgb.png", b"\x00\xff" + png(2, 1, 8, 2, [b"\x01\x02\x03\x04\x05\x06"]))


def bmp(width, height):
    row = (b"\x10\x20\x30" * width).ljust((3 * width + 3) // 4 * 4, b"\x00")
    pixels = row * height
    header = b"BM" + struct.pack("<IHHI", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


def exif_tiff(orientation, big_endian):
    """A TIFF header with one IFD entry: Orientation (0x0112, SHORT)."""
    e = ">" if big_endian else "<"
    return (b"MM\x00*" if big_endian else b"II*\x00") + struct.pack(e + "IHHHIHHI", 8, 1, 0x0112, 3, 1, orientation, 0, 0)


def jpeg_with_exif(jpeg, orientation, big_endian):
    payload = b"Exif\x00\x00" + exif_tiff(orientation, big_endian)
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


def png_with_chunk(data, kind, body):
    """`body` as a `kind` chunk right after the IHDR chunk (8 + 25 bytes)."""
    chunk = struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return data[:33] + chunk + data[33:]


def image_seeds(out, shared):
    folder = os.path.join(shared, "data/bccd/BCCD/JPEGImages")
    by_size = sorted(os.listdir(folder), key=lambda n: os.path.getsize(os.path.join(folder, n)))
    for n in by_size[:2]:
        write(out, "image", n, open(os.path.join(folder, n), "rb").read())
    # EXIF orientation in both byte orders (image_header.cpp's parser, the turn), the end marker
    # missing (decoded whole, with a warning) and the data cut short (grey rows, or refused).
    jpeg = open(os.path.join(folder, by_size[0]), "rb").read()
    write(out, "image", "exif6_le.jpg", jpeg_with_exif(jpeg, 6, False))
    write(out, "image", "exif8_be.jpg", jpeg_with_exif(jpeg, 8, True))
    write(out, "image", "no_end_marker.jpg", jpeg[:-2])
    write(out, "image", "cut_short.jpg", jpeg[:len(jpeg) * 15 // 16])
    rgb = [bytes((x * 40 + y * 7 + c * 90) % 256 for x in range(6) for c in range(3)) for y in range(4)]
    write(out, "image", "rgb.png", png(6, 4, 8, 2, rgb))
    write(out, "image", "exif5.png", png_with_chunk(png(6, 4, 8, 2, rgb), b"eXIf", exif_tiff(5, True)))
    write(out, "image", "trns_before_plte.png",
          png_with_chunk(png(4, 2, 8, 3, [b"\x00\x01\x02\x03"] * 2, bytes(range(12))), b"tRNS", b"\x00\x80"))
    write(out, "image", "rgba16.png", png(2, 2, 16, 6, [b"\x00\x01" * 8] * 2))
    write(out, "image", "gray_alpha.png", png(3, 2, 8, 4, [b"\x10\xff" * 3] * 2))
    write(out, "image", "bottom_up.bmp", bmp(5, 3))
    write(out, "image", "p6.ppm", b"P6\n# seed\n3 2\n255\n" + bytes(range(18)))
    write(out, "image", "p5.pgm", b"P5 4 1 255 " + b"\x00\x40\x80\xff")
    write(out, "image", "p1.pbm", b"P1\n5 2\n1 0 1 0 1\n0 1 0 1 0\n")


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def torch_seeds(out, root):
    """Seeds of the LibTorch readers' harnesses (fuzz_pth, fuzz_safetensors, fuzz_checkpoint)."""
    import zipfile
    folder = os.path.join(root, "tests/fixtures/pth")
    for n in sorted(os.listdir(folder)):
        data = open(os.path.join(folder, n), "rb").read()
        write(out, "pth", n, data)
        with zipfile.ZipFile(os.path.join(folder, n)) as z:  # the pickle alone: the harness wraps it
            pkl = [x for x in z.namelist() if x.endswith("/data.pkl")]
            if pkl:
                write(out, "pth", n + ".pkl", z.read(pkl[0]))
    tensors = [("conv.weight", "F32", [2, 1, 1, 1], struct.pack("<2f", 0.5, -1.0)),
               ("conv.bias", "F16", [2], b"\x00\x3c\x00\xc0"), ("step", "I64", [], struct.pack("<q", 7)),
               ("mask", "BOOL", [3], b"\x01\x00\x01"), ("empty", "BF16", [0, 4], b"")]
    header, data = {"__metadata__": {"format": "pt", "source": "seed"}}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    write(out, "safetensors", "small.safetensors", struct.pack("<Q", len(text)) + text + data)
    text = json.dumps({k: v for k, v in header.items() if k != "__metadata__"}).encode() + b"  "
    write(out, "safetensors", "padded.safetensors", struct.pack("<Q", len(text)) + text + data)
    # .dsckpt (detseg/train/checkpoint.cpp): magic, version, reserved, header length, JSON header,
    # payload, "DSCKEND\0" + CRC32C of everything before the footer.
    entries = {"model": [], "ema": [], "rng": [], "loop": []}
    payload = b""
    for section, name, dtype, shape, raw in [("model", "fc.weight", "f32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
                                             ("model", "fc.bias", "f32", [2], struct.pack("<2f", 0, 1)),
                                             ("rng", "cpu", "u8", [5], b"\x01\x02\x03\x04\x05"),
                                             ("loop", "loss_scale", "f64", [], struct.pack("<d", 65536.0))]:
        entries[section].append([name, dtype, shape, len(payload), len(raw)])
        payload += raw
    optimizer = b"opt-state"
    header = {"step": 12, "metadata": {"model_type": "retinanet", "class_names": ["a", "b"]},
              "tensors": entries, "blobs": {"optimizer": [len(payload), len(optimizer)]},
              "payload_bytes": len(payload) + len(optimizer)}
    text = json.dumps(header).encode()
    body = b"DSEGCKPT" + struct.pack("<IIQ", 1, 0, len(text)) + text + payload + optimizer
    write(out, "checkpoint", "small.dsckpt", body + b"DSCKEND\0" + struct.pack("<I", crc32c(body)))


def main():
    out, root, shared = sys.argv[1:4]
    os.makedirs(os.path.join(out, "dict"), exist_ok=True)
    coco_seeds(out, shared)
    voc_seeds(out, shared)
    config_seeds(out, root)
    png_seeds(out, shared)
    image_seeds(out, shared)
    torch_seeds(out, root)


if __name__ == "__main__":
    main()
