# Finds meshtrain's dependencies. Optional components follow the AUTO / ON / OFF convention:
# AUTO switches the component on when found, ON fails with a clear message when it is missing.

function(meshtrain_resolve_option name found what)
  string(TOUPPER "${${name}}" mode)
  if(NOT mode MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${name} must be AUTO, ON or OFF, got '${${name}}'")
  endif()
  if(mode STREQUAL "OFF")
    set(${name}_ENABLED OFF PARENT_SCOPE)
  elseif(found)
    set(${name}_ENABLED ON PARENT_SCOPE)
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "${name}=ON but ${what} was not found")
  else()
    set(${name}_ENABLED OFF PARENT_SCOPE)
  endif()
endfunction()

find_package(Threads REQUIRED)
find_package(Boost 1.71 REQUIRED)  # Boost.Graph is header-only
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(tomlplusplus 3 REQUIRED)  # the command line's --config files
find_package(ZLIB REQUIRED)  # crc32 of checkpoint chunks
# OpenBLAS, and oneDNN for bf16 GEMMs on CPUs: meshtrain_deps::openblas and meshtrain_deps::dnnl.
include(meshtrainFindDeps)
foreach(_dep openblas dnnl)
  cmake_language(CALL meshtrain_import_${_dep} _dep_missing)
  if(_dep_missing)
    message(FATAL_ERROR "${_dep_missing}")
  endif()
endforeach()

# CUDA toolkit with cuBLAS.
set(_cuda_found OFF)
if(NOT MESHTRAIN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublas)
      set(_cuda_found ON)
    endif()
  endif()
endif()
meshtrain_resolve_option(MESHTRAIN_CUDA ${_cuda_found} "the CUDA toolkit with cuBLAS")
set(MESHTRAIN_HAS_CUDA ${MESHTRAIN_CUDA_ENABLED})
if(MESHTRAIN_HAS_CUDA)
  enable_language(CUDA)
  # Older CMake (3.25 here) does not know that nvcc 12+ accepts C++20 and refuses a required
  # CUDA 20 standard (which CUDA inherits from CXX_STANDARD); the core headers need C++20, so
  # there the flag is passed directly.
  if(DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA_STANDARD 20)
  else()
    set(CMAKE_CUDA_STANDARD_REQUIRED OFF)
    string(APPEND CMAKE_CUDA_FLAGS " -std=c++20")
  endif()
endif()

# NCCL (needs CUDA).
set(_nccl_found OFF)
if(MESHTRAIN_HAS_CUDA AND NOT MESHTRAIN_NCCL STREQUAL "OFF")
  meshtrain_import_nccl(_nccl_missing)
  if(NOT _nccl_missing)
    set(_nccl_found ON)
  endif()
endif()
meshtrain_resolve_option(MESHTRAIN_NCCL ${_nccl_found} "NCCL (nccl.h and libnccl, with the CUDA toolkit)")
set(MESHTRAIN_HAS_NCCL ${MESHTRAIN_NCCL_ENABLED})

# MPI (OpenMPI).
set(_mpi_found OFF)
if(NOT MESHTRAIN_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(_mpi_found ON)
  endif()
endif()
meshtrain_resolve_option(MESHTRAIN_MPI ${_mpi_found} "MPI (install libopenmpi-dev openmpi-bin)")
set(MESHTRAIN_HAS_MPI ${MESHTRAIN_MPI_ENABLED})
