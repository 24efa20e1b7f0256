"""A second held-out set for the equal-time benchmark (bench/bench_learning.sh --data coco128-person):
COCO128's photos with its "person" boxes only, one class, split by image id (every fourth image to
test, the rest to train; images without a person stay in as negatives). Unlike BCCD, nothing in
detseg's recipes was tuned on it, and people have an up and a down.
  python coco128_person.py COCO128_DIR OUT_DIR   ->  OUT_DIR/train.json, OUT_DIR/test.json
"""
import json
import os
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(src, "annotations", "instances_val2017.json")) as f:
        coco = json.load(f)
    person = next(c for c in coco["categories"] if c["name"] == "person")
    images = sorted(coco["images"], key=lambda im: im["id"])
    test_ids = {im["id"] for im in images[3::4]}
    for split, keep in (("train", lambda i: i not in test_ids), ("test", lambda i: i in test_ids)):
        ims = [im for im in images if keep(im["id"])]
        anns = [dict(a, category_id=1) for a in coco["annotations"]
                if a["category_id"] == person["id"] and keep(a["image_id"])]
        with open(os.path.join(out, f"{split}.json"), "w") as f:
            json.dump({"images": ims, "annotations": anns,
                       "categories": [{"id": 1, "name": "person"}]}, f)
        print(f"{split}: {len(ims)} images, {sum(not a.get('iscrowd', 0) for a in anns)} person boxes")


if __name__ == "__main__":
    main()
