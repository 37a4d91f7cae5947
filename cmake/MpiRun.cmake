# How meshtrain starts MPI jobs (ctest and benchmark targets): the one place for mpirun's flags.
#   --oversubscribe            more ranks than cores (CI machines have 2)
#   --allow-run-as-root        CI runs as root in a container
#   --bind-to none             each rank runs a progress thread beside its main thread
#   btl_vader_single_copy_mechanism none
#                              containers often forbid the cross-memory attach (CMA) that
#                              shared-memory transfers use by default
set(MESHTRAIN_MPIEXEC_FLAGS --oversubscribe --allow-run-as-root --bind-to none
    --mca btl_vader_single_copy_mechanism none)

# meshtrain_mpirun_command(OUT NP PROGRAM ARGS...): the command line running PROGRAM on NP ranks.
function(meshtrain_mpirun_command out np)
  set(${out} ${MPIEXEC_EXECUTABLE} ${MESHTRAIN_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} ${np}
      ${ARGN} PARENT_SCOPE)
endfunction()
