// Darknet's detection data: a .data file (train=, valid=, names=, classes=), list files of
// image paths, a label file per image found by Darknet's path rule ("class x y w h" per
// line, normalised), and Darknet's training augmentation (load_data_detection: jitter of
// the aspect ratio, random placement, hue/saturation/exposure, flip), with every random
// draw taken from a generator seeded by (seed, image number), so a run is reproducible and
// resumable from its step alone. A DetectionLoader prepares the next batches on threads of
// its own while the current one trains.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/image.hpp"

namespace tt {

struct DataConfig {
  std::string path, train, valid, names;
  int classes = 0;
  std::vector<std::string> class_names;
  int classes_line = 0, train_line = 0, valid_line = 0;  // where the .data file says them (0: nowhere)
};
// Throws naming file:line for a malformed line, a missing classes=/train=/names=, a
// classes= that is not a whole number in [1, 100000], a key given twice, or a names file
// whose line count differs from classes. Relative paths as Darknet (from the current
// folder), else from the .data file's folder.
DataConfig load_data_config(const std::string& path);
// One path per line, blank lines skipped; a missing file, a folder or an empty list is an
// error naming `what` and the file.
std::vector<std::string> read_list(const std::string& path, const char* what = "image list");
std::string label_path(const std::string& image_path);  // Darknet's find_replace chain

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
// `progress` (if set) is told (pictures checked, pictures listed) after each picture.
CheckedList check_list(const std::string& list, int classes, int64_t max_pixels, bool skip_bad,
                       const std::function<void(const std::string&)>& warn,
                       const std::function<void(size_t, size_t)>& progress = {});

class DetectionLoader {
 public:
  struct Options {
    std::vector<std::string> paths;
    int classes = 0;
    Augment augment;
    int batch = 1;
    int max_boxes = 30;
    uint64_t seed = 1;
    bool skip_bad_images = false;            // warn and take the next image instead of stopping
    int64_t max_pixels = kDefaultMaxPixels;  // larger pictures are refused before decoding
    int threads = 1;
    int prefetch = 2;  // batches prepared ahead
    std::function<void(const std::string&)> warn;
  };
  explicit DetectionLoader(Options o);
  ~DetectionLoader();
  // The batch of training step `step` (counted from the run's start): sample k is image
  // number g = step * batch + k, epoch g / N, the image perm_epoch[g % N] (a permutation
  // drawn from (seed, epoch)), augmented with a generator seeded by (seed, g). Blocks until
  // it is ready; rethrows a worker's error (naming the file).
  void get(int64_t step, float* images, float* truth);
  double wait_s() const { return wait_s_; }  // time get() spent blocked
  int64_t epoch_of(int64_t step) const { return step * o_.batch / int64_t(o_.paths.size()); }

 private:
  struct Batch {
    std::vector<float> images, truth;
    std::exception_ptr error;
    bool ready = false;
  };
  void work();
  void make(int64_t step, Batch& b);
  const std::vector<uint32_t>& permutation(int64_t epoch);

  Options o_;
  std::mutex m_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> batches_;  // being made or made, by step
  int64_t next_ = 0;                  // the next step a worker takes
  int64_t wanted_ = 0;                // the step the trainer asks for next
  bool stop_ = false;
  std::mutex perm_m_;
  std::map<int64_t, std::vector<uint32_t>> perms_;
  std::vector<std::thread> workers_;
  double wait_s_ = 0;
};

}  // namespace tt
