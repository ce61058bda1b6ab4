// Darknet's data sets. A .data file names the lists of pictures (train=, valid=), the
// classes (classes=) and their names: names= for detectors, labels= for classifiers
// (Darknet's train_classifier reads labels=, and top= for its top-k accuracy).
// Detectors: a label file per picture found by Darknet's path rule ("class x y w h" per
// line, normalised) and Darknet's load_data_detection augmentation (jitter of the aspect
// ratio, random placement, hue/saturation/exposure, flip). Classifiers: a picture's class
// is the one label its path contains (Darknet's fill_truth), and Darknet's
// load_image_augment_paths augmentation (rotation, aspect, scale and shift of a crop, flip,
// hue/saturation/exposure). Every random draw comes from a generator seeded by (seed,
// picture number) (batch_loader.hpp), so a run is reproducible and resumable from its step.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/batch_loader.hpp"
#include "data/image.hpp"

namespace tt {

enum class DataKind { Detection, Classification };

struct DataConfig {
  std::string path, train, valid, names;  // names: the names= (detection) or labels= (classification) file
  int classes = 0;
  int top = 0;  // classification: top= (0: not given)
  std::vector<std::string> class_names;
  int classes_line = 0, train_line = 0, valid_line = 0, names_line = 0;  // where the .data file says them (0: nowhere)
};
// Throws naming file:line for a malformed line, a missing classes=/train= or names= (a
// classifier: labels=), a classes= that is not a whole number in [1, 100000], a top= not
// in [1, classes], a key given twice, or a names file whose line count differs from
// classes (a classifier's: also a label given twice). Relative paths as Darknet (from the
// current folder), else from the .data file's folder.
DataConfig load_data_config(const std::string& path, DataKind kind = DataKind::Detection);
// One path per line, blank lines skipped; a missing file, a folder or an empty list is an
// error naming `what` and the file.
std::vector<std::string> read_list(const std::string& path, const char* what = "image list");
// Darknet's find_replace chain: fill_truth_detection's, or (region: YOLOv1's
// fill_truth_region) the same without its "raw" -> "labels".
std::string label_path(const std::string& image_path, bool region = false);

struct TruthBox {
  float x, y, w, h;
  int cls;
};
// Throws naming file:line: missing file, not 5 fields, not numbers, class outside
// [0, classes), x/y/w/h outside [0, 1], w or h zero.
std::vector<TruthBox> read_labels(const std::string& label_file, int classes);

struct Augment {
  int width = 416, height = 416;  // the network's input
  float jitter = 0.2f, hue = 0, saturation = 1, exposure = 1;
  bool flip = true;
};
// One training sample as Darknet's load_data_detection makes it, random draws from `seed`.
// `image`: 3 x height x width floats; `truth`: max_boxes x 5 (x, y, w, h, class), zeros after.
// A picture above `max_pixels` is refused (tt::Error naming it) before it is decoded.
void load_detection_sample(const std::string& image_path, int classes, const Augment& a, uint64_t seed, int max_boxes,
                           float* image, float* truth, int64_t max_pixels = kDefaultMaxPixels);

// One training sample of YOLOv1's [detection] layer as Darknet's load_data_region makes it
// (train_yolo): a crop whose four sides move by up to `jitter` of the picture, resized to
// width x height (no letterbox), flip, hue/saturation/exposure; the boxes shuffled and moved
// with the crop as fill_truth_region's correct_boxes does, those narrower or lower than
// 0.005 left out (fill_truth_region skips them). `truth`: max_boxes x 5 (x, y, w, h,
// class), zeros after. `a.jitter` is the [detection] layer's.
void load_region_sample(const std::string& image_path, int classes, const Augment& a, uint64_t seed, int max_boxes,
                        float* image, float* truth, int64_t max_pixels = kDefaultMaxPixels);
// The up-front check of a list of labelled pictures (train=, valid=), before any training:
// every picture exists and its header is readable and within `max_pixels` (stbi_info: no
// pixel decoded), and its label file exists and parses with `classes` classes. A bad label
// stops, naming the label file and line; a bad picture stops too, naming the list, its line
// and the picture, unless `skip_bad`: then it is left out of `usable`, and `warn` is told
// (one line per picture, the first 10, then a count). No usable picture at all is an error.
// Throws naming the .data file and line unless its train= (valid: valid=) list is a file.
void check_list_file(const DataConfig& d, bool valid);
struct CheckedList {
  std::vector<std::string> usable;  // in list order
  size_t skipped = 0;
};
// `check_truth` throws (tt::Error) if a picture's truth is wrong: detection_truth() or
// classifier_truth(). `progress` (if set) is told (pictures checked, pictures listed) after
// each picture.
using TruthCheck = std::function<void(const std::string& picture)>;
CheckedList check_list(const std::string& list, const TruthCheck& check_truth, int64_t max_pixels, bool skip_bad,
                       const std::function<void(const std::string&)>& warn,
                       const std::function<void(size_t, size_t)>& progress = {});
TruthCheck detection_truth(int classes, bool region = false);         // its label file exists and parses
TruthCheck classifier_truth(const std::vector<std::string>& labels);  // class_in_path finds one

// Darknet's fill_truth: the class whose label the picture's path contains. Darknet trains
// on, with a printed warning, when none or several do; here that is an error naming the
// labels found (one class: a path without its label is that class's absence, -1).
int class_in_path(const std::string& path, const std::vector<std::string>& labels);

// Whether class `cls` is among the k highest of `scores` (Darknet's top_k: a tie goes to
// the lower class).
bool in_top_k(const float* scores, int classes, int cls, int k);

struct ClassifierAugment {
  int width = 224, height = 224, channels = 3;  // the network's input
  float angle = 0, aspect = 1;                  // degrees; a factor in [1/aspect, aspect]
  int min_crop = 224, max_crop = 448;           // the shorter side is scaled to a size in [min, max]
  bool center = false;                          // a centred square crop, no rotation or scale
  float hue = 0, saturation = 1, exposure = 1;
  bool flip = true;
};
// One training sample as Darknet's load_image_augment_paths makes it (random draws from
// `seed`): `image` channels x height x width floats in [0, 1], `truth` one-hot over
// labels.size() floats. One channel: the picture in grey, and the colour distortion acts
// as on a grey RGB picture (only the exposure changes it).
void load_classifier_sample(const std::string& path, const std::vector<std::string>& labels, const ClassifierAugment& a,
                            uint64_t seed, float* image, float* truth, int64_t max_pixels = kDefaultMaxPixels);
// A picture as Darknet's validate_classifier gives it to the net: center_crop_image (the
// centred square of the shorter side, resized to width x height).
void load_classifier_picture(const std::string& path, int width, int height, int channels, float* image,
                             int64_t max_pixels = kDefaultMaxPixels);

// The loader's sample functions (batch_loader.hpp): a detection picture (3 x height x width
// floats, truth max_boxes x 5; region_sample: YOLOv1's) and a classifier picture (channels x height x width, truth
// labels.size() floats).
BatchLoader::Sample detection_sample(int classes, const Augment& a, int max_boxes, int64_t max_pixels);
BatchLoader::Sample region_sample(int classes, const Augment& a, int max_boxes, int64_t max_pixels);
BatchLoader::Sample classifier_sample(const std::vector<std::string>& labels, const ClassifierAugment& a,
                                      int64_t max_pixels);

}  // namespace tt
