#include "tiling/plan_picture.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/image.hpp"
#include "model/op_kind.hpp"
#include "util/error.hpp"

namespace tt {

Rgb tile_colour(int tile) {
  static const Rgb kPalette[] = {{0.84f, 0.15f, 0.16f}, {0.12f, 0.47f, 0.71f}, {0.17f, 0.63f, 0.17f},
                                 {1.00f, 0.50f, 0.05f}, {0.58f, 0.40f, 0.74f}, {0.55f, 0.34f, 0.29f},
                                 {0.89f, 0.47f, 0.76f}, {0.09f, 0.75f, 0.81f}, {0.74f, 0.74f, 0.13f},
                                 {0.00f, 0.00f, 0.55f}, {0.00f, 0.50f, 0.50f}, {0.50f, 0.00f, 0.25f}};
  constexpr int kNamed = int(sizeof kPalette / sizeof kPalette[0]);
  if (tile < kNamed) return kPalette[tile];
  // Golden-ratio steps around the hue circle keep neighbouring tile numbers apart.
  const float h = std::fmod(0.618034f * float(tile), 1.f) * 6.f, x = 1.f - std::fabs(std::fmod(h, 2.f) - 1.f);
  const float v = 0.8f;
  const int sector = int(h);
  const Rgb rgb[6] = {{v, v * x, 0}, {v * x, v, 0}, {0, v, v * x}, {0, v * x, v}, {v * x, 0, v}, {v, 0, v * x}};
  return rgb[std::clamp(sector, 0, 5)];
}

Rgb tile_fill(int tile) {
  const Rgb c = tile_colour(tile);
  return {0.5f + 0.5f * c.r, 0.5f + 0.5f * c.g, 0.5f + 0.5f * c.b};
}

int plan_panels(const Plan& plan) { return int(plan.group_starts.size()) + 1; }

namespace {

const Rgb kWhite{1, 1, 1}, kInk{0.15f, 0.15f, 0.15f}, kFrame{0.f, 0.f, 0.f};
constexpr int kTextScale = 2;  // stb_easy_font's glyphs doubled: about 14 pixels high

// One map to draw: its size in cells, every tile's owned box and the box it reads (empty
// where no halo is drawn), and four lines of text.
struct Panel {
  int h = 0, w = 0;
  std::vector<Box> own, reads;
  std::string lines[4];
};

// The arguments' text run together (as fail() does: chains of + trip GCC 12's -Wrestrict).
template <class... A>
std::string cat(const A&... parts) {
  std::string s;
  ((s += to_str(parts)), ...);
  return s;
}

std::string layer_words(const LayerSpec& s) {
  if (s.is(kShortcutKind)) return cat("shortcut of ", s.inputs[1]);
  if (s.is(kRouteKind)) {
    std::string w = "route";
    for (int r : s.inputs) w += cat(" ", r);
    return w;
  }
  return cat(s.is(kConvKind) ? "conv " : "maxpool ", s.window().size, "x", s.window().size, "/", s.window().stride);
}

std::string cells(int h, int w) { return cat(w, "x", h); }

// The widest halo over tiles and sides, in cells: how far a tile reads beyond its own box.
int halo_cells(const std::vector<Box>& own, const std::vector<Box>& reads) {
  int most = 0;
  for (size_t t = 0; t < own.size(); ++t) {
    const Box& o = own[t];
    const Box& r = reads[t];
    most = std::max({most, o.y0 - r.y0, r.y1 - o.y1, o.x0 - r.x0, r.x1 - o.x1});
  }
  return most;
}

std::vector<Panel> panels_of(const NetSpec& net, const Plan& p) {
  std::vector<Panel> out;
  const int T = p.tiles_count();
  for (size_t g = 0; g < p.group_starts.size(); ++g) {
    const int s = p.group_starts[g], e = p.group_end(s);
    const LayerSpec& ls = net.layers[size_t(s)];
    Panel pn;
    pn.h = ls.in.h;
    pn.w = ls.in.w;
    for (int t = 0; t < T; ++t) {
      pn.own.push_back(s == p.first ? p.own_input[size_t(t)] : p.at(t, s - 1).own);
      pn.reads.push_back(p.at(t, s).in[0]);
    }
    pn.lines[0] = s == p.first ? cat("the input: ", cells(pn.h, pn.w)) : cat("input of ", s, ": ", cells(pn.h, pn.w));
    pn.lines[1] = cat("group ", g, ": layers ", s, e - 1 > s ? cat("-", e - 1) : "");
    pn.lines[2] = cat("layer ", s, ": ", layer_words(ls));
    const int halo = halo_cells(pn.own, pn.reads);
    pn.lines[3] = halo == 0
                      ? "no halo"
                      : cat("halo ", halo, halo > 1 ? " cells" : " cell", s == p.first ? " (input)" : " (exchanged)");
    out.push_back(std::move(pn));
  }
  const int l = p.last - 1;
  const LayerSpec& ls = net.layers[size_t(l)];
  Panel end;
  end.h = ls.out.h;
  end.w = ls.out.w;
  for (int t = 0; t < T; ++t) end.own.push_back(p.at(t, l).own);
  end.reads.assign(size_t(T), Box{});
  end.lines[0] = cat("output of ", l, ": ", cells(end.h, end.w));
  end.lines[1] = "the last tiled layer";
  end.lines[2] = cat("layer ", l, ": ", layer_words(ls));
  end.lines[3] = p.last < int(net.layers.size()) ? cat("untiled from layer ", p.last) : "the net's last layer";
  out.push_back(std::move(end));
  return out;
}

void text(Image& im, int x, int y, const std::string& s, const Rgb& bg = kWhite) {
  draw_label(im, x, y, s, bg.r, bg.g, bg.b, kTextScale);
}

// `s` broken at spaces into lines at most `width` pixels wide.
std::vector<std::string> wrap(const std::string& s, int width) {
  std::vector<std::string> lines;
  std::istringstream words(s);
  std::string word, line;
  while (words >> word) {
    const std::string longer = line.empty() ? word : line + " " + word;
    if (!line.empty() && label_size(longer, kTextScale).w > width) {
      lines.push_back(line);
      line = word;
    } else {
      line = longer;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

void put(Image& im, int x, int y, const Rgb& c) {
  if (x < 0 || y < 0 || x >= im.w || y >= im.h) return;
  im.at(x, y, 0) = c.r;
  im.at(x, y, 1) = c.g;
  im.at(x, y, 2) = c.b;
}

// A map panel at (x0, y0) of the picture: cells scaled so that the longer side is kMapPx.
void draw_panel(Image& im, const Panel& pn, int x0, int y0) {
  for (int k = 0; k < 4; ++k) text(im, x0 + kMapLeft - 2, y0 + 6 + 22 * k, pn.lines[k]);
  const int side = std::max(pn.h, pn.w);
  const auto px = [&](int c) { return int(int64_t(c) * kMapPx / side); };
  const int mx = x0 + kMapLeft, my = y0 + kMapTop;
  const int T = int(pn.own.size());
  // Pixel rectangles [x0, x1) x [y0, y1) of the picture.
  struct Rect {
    int x0, y0, x1, y1;
    bool inside(int x, int y) const { return x >= x0 && x < x1 && y >= y0 && y < y1; }
  };
  const auto rect = [&](const Box& b) { return Rect{mx + px(b.x0), my + px(b.y0), mx + px(b.x1), my + px(b.y1)}; };
  for (int t = 0; t < T; ++t) {
    const Rect r = rect(pn.own[size_t(t)]);
    const Rgb c = tile_fill(t);
    fill_rect(im, r.x0, r.y0, r.x1 - 1, r.y1 - 1, c.r, c.g, c.b);
  }
  // Cell lines, darkening what is under them, where cells are large enough to count (10
  // pixels or more; finer, they turn the map grey).
  const auto darken = [&](int x, int y) {
    for (int k = 0; k < 3; ++k) im.at(x, y, k) *= 0.85f;
  };
  if (kMapPx / side >= 10) {
    for (int c = 1; c < pn.w; ++c)
      for (int y = my; y < my + px(pn.h); ++y) darken(mx + px(c), y);
    for (int c = 1; c < pn.h; ++c)
      for (int x = mx; x < mx + px(pn.w); ++x) darken(x, my + px(c));
  }
  // Halos: the box a tile reads, outside its own box, hatched in its colour; each tile's
  // stripes shifted, so that halos that overlap (at corners) stay apart.
  for (int t = 0; t < T; ++t) {
    if (pn.reads[size_t(t)].empty()) continue;
    const Rect o = rect(pn.own[size_t(t)]);
    Rect r = rect(pn.reads[size_t(t)]);
    if (r.x0 < o.x0) r.x0 = std::max(mx, std::min(r.x0, o.x0 - kMinHaloPx));
    if (r.y0 < o.y0) r.y0 = std::max(my, std::min(r.y0, o.y0 - kMinHaloPx));
    if (r.x1 > o.x1) r.x1 = std::min(mx + px(pn.w), std::max(r.x1, o.x1 + kMinHaloPx));
    if (r.y1 > o.y1) r.y1 = std::min(my + px(pn.h), std::max(r.y1, o.y1 + kMinHaloPx));
    const Rgb c = tile_colour(t);
    for (int y = r.y0; y < r.y1; ++y)
      for (int x = r.x0; x < r.x1; ++x)
        if (!o.inside(x, y) && (x + y + 2 * (t % 4)) % 8 < 2) put(im, x, y, c);
  }
  // Tile borders, the map's frame, and each tile's number in the middle of its cells.
  for (int t = 0; t < T; ++t) {
    const Rect r = rect(pn.own[size_t(t)]);
    draw_box(im, r.x0, r.y0, r.x1 - 1, r.y1 - 1, 1, kInk.r, kInk.g, kInk.b);
  }
  draw_box(im, mx - 1, my - 1, mx + px(pn.w), my + px(pn.h), 1, kFrame.r, kFrame.g, kFrame.b);
  for (int t = 0; t < T; ++t) {
    const Rect r = rect(pn.own[size_t(t)]);
    const std::string n = std::to_string(t);
    const LabelSize sz = label_size(n, kTextScale);
    if (r.x1 - r.x0 < sz.w + 4 || r.y1 - r.y0 < sz.h + 4) continue;
    text(im, (r.x0 + r.x1 - sz.w) / 2, (r.y0 + r.y1 - sz.h) / 2, n, tile_colour(t));
  }
}

}  // namespace

void draw_plan(const NetSpec& net, const Plan& plan, const std::string& title, const std::string& path) {
  const std::vector<Panel> panels = panels_of(net, plan);
  const int n = int(panels.size());
  const int cols = std::clamp(n, 2, kPanelColumns), rows = (n + cols - 1) / cols;
  const int width = cols * kPanelW;
  const std::string legend =
      cat("Filled: the cells each tile owns (its number in the middle). Hatched in a tile's colour: its halo, the "
          "cells it reads beyond its own at a group start (drawn at least ",
          kMinHaloPx, " pixels wide). Inside a group nothing is exchanged.");
  std::vector<std::string> lines = wrap(title, width - 20);
  for (const std::string& l : wrap(legend, width - 20)) lines.push_back(l);
  const int header = std::max(kHeaderH, 16 + 22 * int(lines.size()));
  Image im(width, header + rows * kPanelH, 3, 1.f);
  for (size_t k = 0; k < lines.size(); ++k) text(im, 8, 6 + 22 * int(k), lines[k]);
  for (int i = 0; i < n; ++i) draw_panel(im, panels[size_t(i)], (i % cols) * kPanelW, header + (i / cols) * kPanelH);
  save_png(im, path);
}

}  // namespace tt
