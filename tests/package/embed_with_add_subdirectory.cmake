# cmake -DSOURCE_DIR=... -DWORK_DIR=... [-DLAUNCHER=ccache] -P this file
function(run)
  message(STATUS "> ${ARGN}")
  execute_process(COMMAND ${ARGN} COMMAND_ERROR_IS_FATAL ANY)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
# The whole library compiles here a second time, so as cheaply as it can: unoptimised, without
# debug information, without the optional GPU and MPI parts (the package test builds those).
run(${CMAKE_COMMAND} -S ${CMAKE_CURRENT_LIST_DIR}/embedding_project -B ${WORK_DIR}
    -DMESHTRAIN_SOURCE_DIR=${SOURCE_DIR} -DMESHTRAIN_CUDA=OFF -DMESHTRAIN_MPI=OFF
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
run(${CMAKE_COMMAND} --build ${WORK_DIR} -j2 --target custom_model)
run(${WORK_DIR}/examples/custom_model)
file(REMOVE_RECURSE ${WORK_DIR})
