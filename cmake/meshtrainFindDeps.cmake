# The libraries meshtrain links without a CMake package of theirs, found by hand and made IMPORTED
# targets: meshtrain_deps::openblas, meshtrain_deps::dnnl and meshtrain_deps::nccl. meshtrain's own
# build and the installed meshtrainConfig.cmake both include this file, so the exported targets
# name these targets, not the paths of the machine that built meshtrain.
#
# meshtrain_import_<name>(<missing_var>) defines the target, or sets <missing_var> to a message
# naming the package to install.
include_guard(GLOBAL)

macro(_meshtrain_import name library include package missing_var)
  if(${library} AND ${include})
    set(${missing_var} "")
    if(NOT TARGET meshtrain_deps::${name})
      add_library(meshtrain_deps::${name} UNKNOWN IMPORTED)
      set_target_properties(meshtrain_deps::${name} PROPERTIES IMPORTED_LOCATION "${${library}}"
                            INTERFACE_INCLUDE_DIRECTORIES "${${include}}")
    endif()
  else()
    string(CONCAT ${missing_var} "${name} not found: install ${package} "
                  "(${library}=${${library}}, ${include}=${${include}})")
  endif()
endmacro()

macro(meshtrain_import_openblas missing_var)
  # Debian's libopenblas-dev puts cblas.h in a folder per threading model.
  find_path(MESHTRAIN_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas openblas-pthread)
  find_library(MESHTRAIN_OPENBLAS_LIBRARY openblas)
  _meshtrain_import(openblas MESHTRAIN_OPENBLAS_LIBRARY MESHTRAIN_CBLAS_INCLUDE libopenblas-dev
                    ${missing_var})
endmacro()

# oneDNN's own CMake package also asks for the OpenCL headers (its GPU runtime), which meshtrain's
# CPU kernels never use.
macro(meshtrain_import_dnnl missing_var)
  find_path(MESHTRAIN_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp)
  find_library(MESHTRAIN_DNNL_LIBRARY dnnl)
  _meshtrain_import(dnnl MESHTRAIN_DNNL_LIBRARY MESHTRAIN_DNNL_INCLUDE libdnnl-dev ${missing_var})
endmacro()

# NVIDIA's packages install NCCL beside the CUDA toolkit (find_package(CUDAToolkit) first).
macro(meshtrain_import_nccl missing_var)
  find_path(MESHTRAIN_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(MESHTRAIN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  _meshtrain_import(nccl MESHTRAIN_NCCL_LIBRARY MESHTRAIN_NCCL_INCLUDE libnccl-dev ${missing_var})
endmacro()
