# graph_challenge on several MPI ranks against the single process (a CTest entry, label mpi):
#
#   cmake -DEXE=graph_challenge -DMPIEXEC=mpiexec "-DFLAGS=..." -DNP_FLAG=-n -DRANKS=3
#         "-DARGS=infer;--neurons;..." -DWORK=dir -P mpi_compare.cmake
#
# Runs `EXE ARGS` once as a single process and once under `MPIEXEC NP_FLAG RANKS`; both must exit
# 0 and print the same "categories:" count; the ranks' run must report RANKS ranks (and, for
# bench, the JSON fields "ranks" and "rank_seconds"). For infer each run writes --categories into
# WORK and the two files must be identical. A run past 100 s counts as a hang.
foreach(v EXE MPIEXEC NP_FLAG RANKS ARGS WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "mpi_compare: -D${v}=... is required")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK}")
list(GET ARGS 0 command)
set(one_args ${ARGS})
set(ranks_args ${ARGS})
if(command STREQUAL "infer")
  file(REMOVE "${WORK}/one.tsv" "${WORK}/ranks${RANKS}.tsv")
  list(APPEND one_args --categories "${WORK}/one.tsv")
  list(APPEND ranks_args --categories "${WORK}/ranks${RANKS}.tsv")
endif()

execute_process(COMMAND "${EXE}" ${one_args} RESULT_VARIABLE rc1 OUTPUT_VARIABLE out1 ERROR_VARIABLE err1 TIMEOUT 100)
message("single process (exit ${rc1}):\n${out1}${err1}")
if(NOT rc1 EQUAL 0)
  message(FATAL_ERROR "mpi_compare: the single process exited ${rc1}")
endif()
execute_process(COMMAND ${MPIEXEC} ${FLAGS} ${NP_FLAG} ${RANKS} "${EXE}" ${ranks_args}
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE out2 ERROR_VARIABLE err2 TIMEOUT 100)
message("${RANKS} ranks (exit ${rc2}):\n${out2}${err2}")
if(NOT rc2 EQUAL 0)
  message(FATAL_ERROR "mpi_compare: ${RANKS} ranks exited ${rc2} (a hang if not a number)")
endif()

string(REGEX MATCH "categories: +([0-9]+)" m1 "${out1}")
set(c1 "${CMAKE_MATCH_1}")
string(REGEX MATCH "categories: +([0-9]+)" m2 "${out2}")
set(c2 "${CMAKE_MATCH_1}")
if(c1 STREQUAL "" OR NOT c1 STREQUAL c2)
  message(FATAL_ERROR "mpi_compare: categories '${c1}' (single process) vs '${c2}' (${RANKS} ranks)")
endif()
string(REGEX MATCHALL "categories: " lines "${out2}")
list(LENGTH lines n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "mpi_compare: ${n} summaries from ${RANKS} ranks, expected one (rank 0's)")
endif()
if(NOT out2 MATCHES "ranks: +${RANKS} " OR NOT out2 MATCHES "${RANKS} ranks: max ")
  message(FATAL_ERROR "mpi_compare: no per-rank report for ${RANKS} ranks")
endif()
if(command STREQUAL "bench" AND NOT out2 MATCHES "\"ranks\":${RANKS},\"rank_seconds\":\\[[^]]+\\]}")
  message(FATAL_ERROR "mpi_compare: the bench JSON line lacks \"ranks\":${RANKS} and \"rank_seconds\"")
endif()
if(command STREQUAL "infer")
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/one.tsv" "${WORK}/ranks${RANKS}.tsv" RESULT_VARIABLE same)
  if(NOT same EQUAL 0)
    message(FATAL_ERROR "mpi_compare: the categories written by ${RANKS} ranks differ from the single process's")
  endif()
endif()
message("mpi_compare: ${RANKS} ranks: ${c2} categories, as the single process")
