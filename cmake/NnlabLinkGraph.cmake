# cmake/NnlabLinkGraph.cmake: the project's link graph, written at configure time for
# scripts/check_layers.py (the layering test): one line per target of ours,
#   <target> TAB <defining folder> TAB <dependency>;<dependency>;... TAB <source folders>
# (folders relative to the root; the source folders are those of its source files in the
# tree: nnlab_cuda_bench is defined in kernels/cuda/ but compiled from kernels/cuda/bench/,
# which is what places it), with every direct dependency that is a target of ours: LINK_LIBRARIES,
# INTERFACE_LINK_LIBRARIES and add_dependencies. Imported targets (CLI11, OpenMP, zlib)
# are left out: they are in no layer. Generator expressions are read for the target names
# they hold ($<$<COMPILE_LANGUAGE:CXX>:x> -> x), so a conditional link is still checked.
# Called once, at the end of the top CMakeLists.txt, when every target exists.

function(nnlab_collect_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    nnlab_collect_targets("${sub}" sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(nnlab_write_link_graph file)
  nnlab_collect_targets("${PROJECT_SOURCE_DIR}" targets)
  set(text "")
  foreach(t IN LISTS targets)
    get_target_property(src ${t} SOURCE_DIR)
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${src}")
    set(raw "")
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES MANUALLY_ADDED_DEPENDENCIES)
      get_target_property(v ${t} ${prop})
      if(v)
        list(APPEND raw ${v})
      endif()
    endforeach()
    set(deps "")
    foreach(item IN LISTS raw)
      # The names inside generator expressions: split at the genex punctuation.
      string(REGEX REPLACE "[$<>:,]" ";" parts "${item}")
      foreach(name IN LISTS parts)
        if(name AND TARGET ${name})
          get_target_property(imported ${name} IMPORTED)
          get_target_property(aliased ${name} ALIASED_TARGET)
          if(aliased)
            set(name ${aliased})
          endif()
          if(NOT imported AND NOT name STREQUAL t)
            list(APPEND deps ${name})
          endif()
        endif()
      endforeach()
    endforeach()
    list(REMOVE_DUPLICATES deps)
    get_target_property(sources ${t} SOURCES)
    set(folders "")
    foreach(f IN LISTS sources)
      if(NOT f OR f MATCHES "^\\$<")
        continue()  # a generator expression: no file
      endif()
      if(NOT IS_ABSOLUTE "${f}")
        set(f "${src}/${f}")
      endif()
      file(RELATIVE_PATH frel "${PROJECT_SOURCE_DIR}" "${f}")
      string(FIND "${f}" "${CMAKE_BINARY_DIR}/" in_build)
      if(frel MATCHES "^\\.\\./" OR in_build EQUAL 0)
        continue()  # generated, or outside the tree
      endif()
      get_filename_component(fdir "${frel}" DIRECTORY)
      list(APPEND folders "${fdir}")
    endforeach()
    list(REMOVE_DUPLICATES folders)
    string(APPEND text "${t}\t${rel}\t${deps}\t${folders}\n")
  endforeach()
  file(WRITE "${file}" "${text}")
endfunction()
