#include "layers/dnnl_context.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace tt {

Buffer::Buffer(size_t floats) : n_(floats) {
  size_t bytes = ((floats * sizeof(float) + 63) / 64) * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  p_.reset(static_cast<float*>(p));
}

void Buffer::Free::operator()(float* p) const { std::free(p); }

DnnlContext::DnnlContext() : eng(dnnl::engine::kind::cpu, 0), strm(eng) {}

memory DnnlContext::scratchpad(const memory::desc& d) {
  size_t need = (d.get_size() + sizeof(float) - 1) / sizeof(float);
  if (need > scratch_.size()) scratch_ = Buffer(need);
  return memory(d, eng, DNNL_MEMORY_NONE);
}

memory DnnlContext::grad_scratch(const memory::desc& d) {
  size_t need = (d.get_size() + sizeof(float) - 1) / sizeof(float);
  if (need > grad_scratch_.size()) grad_scratch_ = Buffer(need);
  return memory(d, eng, DNNL_MEMORY_NONE);
}

void DnnlContext::bind_scratchpad(memory& m) { m.set_data_handle(scratch_.data()); }

void DnnlContext::execute(const dnnl::primitive& p, Args& args) {
  auto it = args.find(DNNL_ARG_SCRATCHPAD);
  if (it != args.end()) bind_scratchpad(it->second);
  p.execute(strm, args);
  strm.wait();
}

int WeightCache::slot(const memory::desc& d) {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].desc == d) return int(i);
  Entry e;
  e.desc = d;
  e.buf = Buffer(d.get_size() / sizeof(float) + 16);
  e.src = memory(plain_, ctx_.eng, DNNL_MEMORY_NONE);
  e.dst = memory(d, ctx_.eng, e.buf.data());
  e.to_format = dnnl::reorder(e.src, e.dst);
  e.args = {{DNNL_ARG_FROM, e.src}, {DNNL_ARG_TO, e.dst}};
  entries_.push_back(std::move(e));
  return int(entries_.size() - 1);
}

void WeightCache::refresh(const float* plain_weights) {
  for (auto& e : entries_) {
    e.src.set_data_handle(const_cast<float*>(plain_weights));
    e.to_format.execute(ctx_.strm, e.args);
  }
  ctx_.strm.wait();
}

}  // namespace tt
