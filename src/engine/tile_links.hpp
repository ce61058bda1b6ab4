// Moving pieces of maps between tiles: a copy when both tiles are in this process, a
// message straight between the two tiles' buffers when they are not.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/comm.hpp"
#include "device/device.hpp"
#include "layers/maxpool.hpp"
#include "layers/tensor.hpp"
#include "tiling/plan.hpp"

namespace tt {

class TileLinks {
 public:
  TileLinks(Comm& comm, Device& device, const std::vector<int>& tile_rank)
      : comm_(comm), dev_(device), tile_rank_(tile_rank) {}
  Comm& comm() const { return comm_; }

  // Every piece (cells `box` of tile `from`'s src_of(from) into tile `to`'s dst_of(to)):
  // copies the pieces between local tiles and posts the messages, tagged tag0 + the
  // piece's index; comm().wait_all() completes them.
  template <class Src, class Dst>
  void post(const std::vector<Piece>& pieces, Src src_of, Dst dst_of, int tag0 = 0) const {
    const int me = comm_.rank();
    for (size_t k = 0; k < pieces.size(); ++k) {
      const Piece& pc = pieces[k];
      const int from = tile_rank_[size_t(pc.from)], to = tile_rank_[size_t(pc.to)], tag = tag0 + int(k);
      if (from == me && to == me) {
        const TensorView a = src_of(pc.from), b = dst_of(pc.to);
        if (a.data != b.data) dev_.copy_region(a, b, pc.box);
      } else if (from == me) {
        comm_.isend(src_of(pc.from), pc.box, to, tag);
      } else if (to == me) {
        comm_.irecv(dst_of(pc.to), pc.box, from, tag);
      }
    }
  }

  // The same for byte maps (max-pool winners): bytes_of(t) laid out as shape_of(t) (a
  // TensorView whose data is unused).
  template <class Bytes, class Shape>
  void post_bytes(const std::vector<Piece>& pieces, Bytes bytes_of, Shape shape_of, int tag0 = 0) const {
    const int me = comm_.rank();
    for (size_t k = 0; k < pieces.size(); ++k) {
      const Piece& pc = pieces[k];
      const int from = tile_rank_[size_t(pc.from)], to = tile_rank_[size_t(pc.to)], tag = tag0 + int(k);
      const TensorView a = shape_of(pc.from), b = shape_of(pc.to);
      if (from == me && to == me)
        copy_winners(bytes_of(pc.from), a.box, bytes_of(pc.to), b.box, a, pc.box);
      else if (from == me)
        comm_.isend_bytes(bytes_of(pc.from), a, pc.box, to, tag);
      else if (to == me)
        comm_.irecv_bytes(bytes_of(pc.to), b, pc.box, from, tag);
    }
  }

 private:
  Comm& comm_;
  Device& dev_;
  const std::vector<int>& tile_rank_;
};

}  // namespace tt
