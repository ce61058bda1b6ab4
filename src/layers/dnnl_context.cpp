#include "layers/dnnl_context.hpp"

#include <algorithm>
#include <cstdint>

namespace tt {

DnnlContext::DnnlContext(KernelPath path, int block, Device& dev)
    : device(dev), eng(dnnl::engine::kind::cpu, 0), strm(eng), config(make_kernel_config(eng, path, block)) {}

memory DnnlContext::scratchpad(const memory::desc& d) {
  size_t need = (d.get_size() + sizeof(float) - 1) / sizeof(float);
  if (need > scratch_.size()) scratch_ = Buffer(need);
  return memory(d, eng, DNNL_MEMORY_NONE);
}

memory DnnlContext::grad_scratch(const memory::desc& d) {
  size_t need = (d.get_size() + sizeof(float) - 1) / sizeof(float);
  if (grad_in_staging_)
    reserve_staging(0, need);
  else if (need > grad_scratch_.size())
    grad_scratch_ = Buffer(need);
  return memory(d, eng, DNNL_MEMORY_NONE);
}

void DnnlContext::reserve_work(size_t floats) {
  if (floats > scratch_.size()) scratch_ = Buffer(floats);
}

void DnnlContext::bind_scratchpad(memory& m) { m.set_data_handle(scratch_.data()); }

void DnnlContext::execute(const dnnl::primitive& p, Args& args) {
  auto it = args.find(DNNL_ARG_SCRATCHPAD);
  if (it != args.end()) bind_scratchpad(it->second);
  p.execute(strm, args);
  strm.wait();
}

void DnnlContext::reserve_staging(size_t k, size_t floats) {
  if (staging_.size() <= k) staging_.resize(k + 1);
  if (staging_[k].size() < floats) staging_[k] = Buffer(floats);
}

size_t DnnlContext::staging_bytes() const {
  size_t b = 0;
  for (const Buffer& s : staging_) b += s.size() * sizeof(float);
  return b;
}

int WeightCache::slot(const memory::desc& d, Use use) {
  const size_t floats = d.get_size() / sizeof(float) + 16;
  // Staged: a buffer that no other format of the same use holds.
  auto place = [&](Entry& e) {
    bool clash = false;
    size_t free_stage = 0;
    for (const Entry& o : entries_)
      if (&o != &e && (o.uses & e.uses)) {
        clash |= o.stage == e.stage;
        free_stage = std::max(free_stage, o.stage + 1);
      }
    if (clash) e.stage = free_stage;
    ctx_.reserve_staging(e.stage, floats);
  };
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].desc == d) {
      entries_[i].uses |= use;
      if (staged_) place(entries_[i]);
      return int(i);
    }
  Entry e;
  e.desc = d;
  e.uses = use;
  if (!sharded_ && d == plain_) {  // read in place: no copy to keep
    e.in_place = true;
    entries_.push_back(std::move(e));
    return int(entries_.size() - 1);
  }
  if (staged_)
    place(e);
  else
    e.buf = Buffer(floats);
  e.src = memory(plain_, ctx_.eng, DNNL_MEMORY_NONE);
  e.dst = memory(d, ctx_.eng, DNNL_MEMORY_NONE);
  e.to_format = dnnl::reorder(e.src, e.dst);
  // From a blocked copy made just before, where oneDNN moves whole blocks (jit:blk, e.g.
  // backward-data's OIhw16o16i from forward's OIhw16i16o): cheaper than gathering every
  // block from the plain weights again.
  for (size_t i = 0; !staged_ && i < entries_.size(); ++i) {
    if (entries_[i].in_place) continue;
    const dnnl::reorder::primitive_desc pd(ctx_.eng, entries_[i].desc, ctx_.eng, d);
    if (std::string(pd.impl_info_str()) != "jit:blk") continue;
    e.from = int(i);
    e.src = memory(entries_[i].desc, ctx_.eng, DNNL_MEMORY_NONE);
    e.to_format = dnnl::reorder(pd);
    break;
  }
  e.args = {{DNNL_ARG_FROM, e.src}, {DNNL_ARG_TO, e.dst}};
  entries_.push_back(std::move(e));
  return int(entries_.size() - 1);
}

namespace {
memory::desc rows_of(const memory::desc& d, int rows, int o0) {
  memory::dims dims = d.dims(), offsets(dims.size(), 0);
  if (dims.size() == 5) {  // grouped weights {g, oc/g, ...}: only ever all of them
    if (o0 != 0 || rows != dims[0] * dims[1])
      fail("internal: output channels ", o0, "+", rows, " of grouped weights of ", dims[0] * dims[1], " channels");
    return d;
  }
  dims[0] = rows;
  offsets[0] = o0;
  return d.submemory_desc(dims, offsets);
}
}  // namespace

// Built on the rows at offset 0; other rows are the same layout shifted by their offset.
RowsReorder::RowsReorder(const dnnl::engine& eng, const memory::desc& from, const memory::desc& to, int rows)
    : from_(from),
      to_(to),
      rows_(rows),
      src_(rows_of(from, rows, 0), eng, DNNL_MEMORY_NONE),
      dst_(rows_of(to, rows, 0), eng, DNNL_MEMORY_NONE) {
  reorder_ = dnnl::reorder(src_, dst_);
  args_ = {{DNNL_ARG_FROM, src_}, {DNNL_ARG_TO, dst_}};
}

void RowsReorder::run(dnnl::stream& strm, const float* from, int from_o0, float* to, int to_o0) {
  src_.set_data_handle(const_cast<float*>(from) + rows_of(from_, rows_, from_o0).data.offset0);
  dst_.set_data_handle(to + rows_of(to_, rows_, to_o0).data.offset0);
  reorder_.execute(strm, args_);
  strm.wait();
}

void WeightCache::prepare_rows(int rows) {
  for (Entry& e : entries_) {
    bool have = false;
    for (const auto& r : e.rows) have |= r.rows() == rows;
    if (!have) e.rows.emplace_back(ctx_.eng, plain_, e.desc, rows);
  }
}

void WeightCache::refresh_rows(const float* plain_rows, int o0, int rows, int uses) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (!(e.uses & uses)) continue;
    for (auto& r : e.rows)
      if (r.rows() == rows) r.run(ctx_.strm, plain_rows, 0, data(int(i)), o0);
  }
}

void WeightCache::refresh(const float* plain_weights, int uses) {
  master_ = plain_weights;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    // (Only staged entries skip: a kept format may be made from another, e.from.)
    if (e.in_place || (staged_ && !(e.uses & uses))) continue;
    e.src.set_data_handle(e.from < 0 ? const_cast<float*>(plain_weights) : data(e.from));
    e.dst.set_data_handle(data(int(i)));
    e.to_format.execute(ctx_.strm, e.args);
  }
  ctx_.strm.wait();
}

}  // namespace tt
