// tiletrain plan --draw: one PNG that shows a Plan. A panel per map where tiles meet their
// neighbours: the input of every group's start layer (the net's input for the first group,
// else the previous group's last output), and the output of the last tiled layer. Inside a
// group nothing is exchanged, so the maps between add nothing a reader needs; a 16-layer
// net in 4 groups gives 5 panels rather than 16.
//
// Each panel: the map scaled so that its longer side is kMapPx pixels, every tile's owned
// cells filled with its colour (tile_colour, lightened), and at a group start the halo each
// tile reads beyond its own cells (its `in` box outside its owned box) hatched in its colour
// over the neighbour's cells. All boxes are the plan's own.
#pragma once
#include <string>

#include "model/net_spec.hpp"
#include "tiling/plan.hpp"

namespace tt {

// The layout, in pixels: panels of kPanelW x kPanelH in rows of at most kPanelColumns (at
// least two columns wide, for the header's text) under a kHeaderH header (taller when its
// wrapped text needs more than four lines); a panel's map starts at (kMapLeft, kMapTop)
// inside it.
constexpr int kMapPx = 320, kPanelW = 360, kPanelH = 444, kHeaderH = 104, kPanelColumns = 4;
constexpr int kMapLeft = 20, kMapTop = 100;
// A halo narrower than this many pixels (one cell of a 416 x 416 map is under one) is drawn
// this wide, into the neighbour's cells.
constexpr int kMinHaloPx = 4;

struct Rgb {
  float r = 0, g = 0, b = 0;
};
// Tile t's colour: distinct for the first dozen tiles, then around the hue circle.
Rgb tile_colour(int tile);
// The fill of tile t's owned cells: its colour mixed halfway with white.
Rgb tile_fill(int tile);

// How many panels draw_plan draws for `plan` (group starts and the last output).
int plan_panels(const Plan& plan);
// Draws the plan of `net` into a PNG at `path` (written atomically); `title` heads it (the
// cfg, grid and groups as the user gave them).
void draw_plan(const NetSpec& net, const Plan& plan, const std::string& title, const std::string& path);

}  // namespace tt
