// [crop]: Darknet's crop layer (crop_layer.c, its CPU path): a crop_height x crop_width
// window of the input, scaled to 2x - 1 (x unless noadjust=1). Training crops at a random
// offset and flips left-right at random (flip=1), one draw per step for the whole batch,
// from the run's seed and the step, so that every rank and every partition sees the same
// crop; inference takes the centre. Darknet's backward passes nothing on; this one passes
// the true gradient (it matters only for a crop that is not the first layer). Darknet's GPU
// alone applies angle, saturation, exposure and shift; its CPU, which tiletrain follows,
// reads and ignores them. A [crop] at layer 0 runs on the whole picture before the tiled
// part (NetSpec::first_tiled), as it reads across the tiles.
#include "model/cfg_reader.hpp"
#include "model/net_limits.hpp"
#include "model/op_kind.hpp"
#include "ops/op.hpp"
#include "util/hash.hpp"

namespace tt {

struct CropParams {
  int height = 1, width = 1;  // the cfg's crop, at the cfg's input size
  bool flip = false, noadjust = false;
  // Darknet's resize_crop_layer: at another input size the crop is scale x that size (both
  // sides by crop_height / the cfg's input height). Set when the cfg's shapes are resolved.
  float scale = 0;
  int cfg_h = 0, cfg_w = 0;  // the cfg's input size, where the crop is the cfg's
};

namespace {

const CropParams& params(const LayerSpec& l) { return l.params_as<CropParams>(); }

class CropOp final : public Op {
 public:
  using Op::Op;
  void forward(const OpStep& st, const OpTensors& t) const override {
    const Where w = where(st);
    each_cell(st.batch, w, [&](int64_t src, int64_t dst) { t.out[dst] = t.in[0][src] * w.scale + w.trans; });
  }
  void backward(const OpStep& st, const OpTensors& t) const override {
    const Where w = where(st);
    each_cell(st.batch, w, [&](int64_t src, int64_t dst) { t.din[0][src] += w.scale * t.dout[dst]; });
  }
  OpCost cost() const override { return {2. * spec.out.size(), float_bytes(2. * spec.out.size())}; }

 private:
  struct Where {
    int dh, dw;
    bool flip;
    float scale, trans;
  };
  Where where(const OpStep& st) const {
    const CropParams& p = params(spec);
    const int spare_h = spec.in.h - spec.out.h, spare_w = spec.in.w - spec.out.w;
    Where w{spare_h / 2, spare_w / 2, false, p.noadjust ? 1.f : 2.f, p.noadjust ? 0.f : -1.f};
    if (st.training) {
      const uint64_t r = mix(st.seed ^ mix(uint64_t(st.step) + 0x6372ULL));
      w.flip = p.flip && (r & 1);
      w.dh = int((r >> 1) % uint64_t(spare_h + 1));
      w.dw = int(mix(r) % uint64_t(spare_w + 1));
    }
    return w;
  }
  // Visits (input index, output index) for every output value of the batch.
  template <class F>
  void each_cell(int batch, const Where& w, F&& f) const {
    const Shape &in = spec.in, &out = spec.out;
    for (int b = 0; b < batch; ++b)
      for (int c = 0; c < in.c; ++c)
        for (int i = 0; i < out.h; ++i) {
          const int64_t row = ((int64_t(b) * in.c + c) * in.h + i + w.dh) * in.w;
          const int64_t dst = ((int64_t(b) * out.c + c) * out.h + i) * out.w;
          for (int j = 0; j < out.w; ++j) f(row + (w.flip ? in.w - w.dw - j - 1 : j + w.dw), dst + j);
        }
  }
};

}  // namespace

std::unique_ptr<Op> make_crop_op(const NetSpec&, const LayerSpec& s) { return std::make_unique<CropOp>(s); }

namespace {
void parse_crop(CfgReader& r, LayerSpec& l) {
  CropParams& p = l.params.emplace<CropParams>();
  p.height = r.count("crop_height", 1, net_detail::kMaxDim, "the largest map's side");
  p.width = r.count("crop_width", 1, net_detail::kMaxDim, "the largest map's side");
  p.flip = r.integer("flip", 0) != 0;
  p.noadjust = r.integer("noadjust", 0) != 0;
  r.reject_unused({"angle", "saturation", "exposure", "shift"});  // Darknet's GPU path only
}

void crop_shape(const NetSpec&, LayerSpec& l, const ShapeCheck& check) {
  CropParams& p = l.params_as<CropParams>();
  if (p.scale == 0) {  // the cfg's own size
    if (p.height > l.in.h || p.width > l.in.w)
      fail(check.where(), ": a ", p.height, "x", p.width, " crop (crop_height x crop_width) is larger than its ",
           l.in.h, "x", l.in.w, " input");
    p.scale = float(p.height) / float(l.in.h);
    p.cfg_h = l.in.h;
    p.cfg_w = l.in.w;
    l.out = check.checked(l.in.c, p.height, p.width);
    return;
  }
  const int h = l.in.h == p.cfg_h ? p.height : int(p.scale * float(l.in.h));
  const int w = l.in.w == p.cfg_w ? p.width : int(p.scale * float(l.in.w));
  if (h < 1 || w < 1 || h > l.in.h || w > l.in.w)
    fail(check.where(), ": at a ", l.in.h, "x", l.in.w, " input the crop (", p.scale,
         " x the input, as Darknet resizes it) would be ", h, "x", w);
  l.out = check.checked(l.in.c, h, w);
}
}  // namespace

extern const OpKind kCropKind{"crop", nullptr, parse_crop, crop_shape, flops_per_input};

}  // namespace tt
