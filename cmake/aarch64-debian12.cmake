# CMake toolchain file: Debian 12 (bookworm) amd64 host -> aarch64 Linux (Raspberry Pi 3/4/5),
# with Debian's g++-aarch64-linux-gnu (GCC 12). Used by scripts/test-arm64.sh; see docs/arm64.md.
#
#   cmake -S . -B build-a64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-debian12.cmake \
#         -DA64_ROOT=/opt/a64/root -DTILETRAIN_NATIVE=OFF -DTILETRAIN_DARKNET_LIBRARY=OFF ...
#
# arm64 files come from two places:
#   /         multiarch packages (apt-get install pkg:arm64): libc6-dev, zlib1g-dev, libgtest-dev,
#             libhwy-dev, ... (headers in /usr/include, libraries in /usr/lib/aarch64-linux-gnu)
#   A64_ROOT  packages that cannot be co-installed with their amd64 twins, unpacked with dpkg -x:
#             libdnnl-dev + libdnnl2 (dnnl_config.h differs from amd64's), Open MPI
#             (libopenmpi-dev, libopenmpi3, openmpi-bin and their runtime closure)
# Header-only amd64 packages (nlohmann-json3-dev, libcli11-dev) are used as they are.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER   aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(A64_ROOT /opt/a64/root CACHE PATH "dpkg -x sysroot for arm64 packages that are not co-installable")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES A64_ROOT)
set(CMAKE_FIND_ROOT_PATH ${A64_ROOT} /)   # A64_ROOT first: its dnnl headers win over amd64's /usr/include ones
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (pkg_check_modules, e.g. for libhwy): arm64 .pc files only, never the host's.
# A64_ROOT's .pc files are left out: they say prefix=/usr, which is wrong for an unpacked tree.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# ld must resolve the DT_NEEDED entries of libmpi.so.40 (libopen-rte, libpmix, libhwloc, ...).
set(_a64_lib ${A64_ROOT}/usr/lib/aarch64-linux-gnu)
set(CMAKE_EXE_LINKER_FLAGS_INIT    "-Wl,-rpath-link,${_a64_lib}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${_a64_lib}")

# Target binaries (gtest_discover_tests at build time, ctest's entries) run through qemu-user;
# -L makes the loader look in A64_ROOT first and fall back to the host's multiarch arm64 libraries.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L ${A64_ROOT})

# Open MPI: the arm64 mpicxx wrapper cannot run on the host and the amd64 one prints amd64 paths,
# so FindMPI is handed the include directory and libraries (as Debian's mpicxx: -lmpi_cxx -lmpi;
# without mpi_cxx the C++ check fails on undefined MPI::Comm::Comm()).
set(MPI_SKIP_COMPILER_WRAPPER TRUE CACHE BOOL "")
set(MPI_ASSUME_NO_BUILTIN_MPI TRUE CACHE BOOL "")
set(MPI_C_COMPILER_INCLUDE_DIRS   ${_a64_lib}/openmpi/include CACHE STRING "")
set(MPI_CXX_COMPILER_INCLUDE_DIRS ${_a64_lib}/openmpi/include CACHE STRING "")
set(MPI_C_LIB_NAMES   mpi CACHE STRING "")
set(MPI_CXX_LIB_NAMES mpi_cxx mpi CACHE STRING "")
set(MPI_mpi_LIBRARY     ${_a64_lib}/openmpi/lib/libmpi.so     CACHE FILEPATH "")
set(MPI_mpi_cxx_LIBRARY ${_a64_lib}/openmpi/lib/libmpi_cxx.so CACHE FILEPATH "")
