// Releasing Python objects from threads that do not hold the GIL.
#pragma once

#include <functional>

namespace fxpy {

// Runs `release` (which drops Python references) with the GIL held: at
// once when this thread holds it, else later on the interpreter's main
// thread (Py_AddPendingCall). Graph nodes and imported buffers hold Python
// objects and may die on a stream worker or on an eval thread that gave
// the GIL up; blocking there for the GIL could deadlock against a thread
// that holds it and waits for that worker or that eval.
void release_under_gil(std::function<void()> release);

}  // namespace fxpy
