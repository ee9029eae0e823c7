"""Hand-written model replies to entries of afm's BFCL sample, with the verdict BFCL's own
checker gives each (``bfcl-eval`` 2026.3.23, recorded by ``tests/slow/evaluation/
test_bfcl_reference.py``, which re-derives them from the package on every slow run).

Each case: (task, entry id, reply, expected valid, expected BFCL error type)."""

from __future__ import annotations


def call(name: str, **arguments: object) -> str:
    import json

    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


CASES: list[tuple[str, str, str, bool, str]] = [
    # simple: right call, wrong argument, extra call, no call, and each rule on its own
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base=10, height=5), True, ""),
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base=10, height=5, unit="Units"), True, ""),
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base=12, height=5), False, "value_error:others"),
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base=10, height=5)
     + call("calculate_triangle_area", base=5, height=10), False, "simple_function_checker:wrong_count"),
    ("bfcl_simple", "simple_python_0", "The area is 25 square units.", False, "simple_function_checker:wrong_count"),
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base="10", height=5), False, "type_error:simple"),
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base=10), False,
     "simple_function_checker:missing_required"),
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base=10, height=5, color="red"), False,
     "simple_function_checker:unexpected_param"),
    ("bfcl_simple", "simple_python_0", call("triangle_area", base=10, height=5), False,
     "simple_function_checker:wrong_func_name"),
    ("bfcl_simple", "simple_python_0", call("calculate_triangle_area", base=10, height=5, unit="cm"), False,
     "value_error:string"),
    ("bfcl_simple", "simple_python_0", '<tool_call>{"name": "calculate_triangle_area", "arguments": {base: 10}}</tool_call>',
     False, "ast_decoder:decoder_failed"),
    ("bfcl_simple", "simple_python_0", '<tool_call>{"name": "calculate_triangle_area", "arguments": [10, 5]}</tool_call>',
     False, "ast_decoder:decoder_wrong_output_format"),
    ("bfcl_simple", "simple_python_1", call("math.factorial", number=5), True, ""),
    ("bfcl_simple", "simple_python_1", call("math.factorial", number=5.0), False, "type_error:simple"),
    ("bfcl_simple", "simple_python_1", call("math.factorial", number=True), False, "type_error:simple"),
    # multiple: the right function among several, an int for a float, optional booleans
    ("bfcl_multiple", "multiple_0", call("triangle_properties.get", side1=5, side2=4, side3=3), True, ""),
    ("bfcl_multiple", "multiple_0", call("triangle_properties.get", side1=5, side2=4, side3=3, get_area=False),
     False, "value_error:others"),
    ("bfcl_multiple", "multiple_0", call("circle_properties.get", radius=3), False,
     "simple_function_checker:wrong_func_name"),
    ("bfcl_multiple", "multiple_3", call("EuclideanDistance.calculate", pointA=[3, 4], pointB=[1, 2]), True, ""),
    ("bfcl_multiple", "multiple_3", call("EuclideanDistance.calculate", pointA=[3, 4], pointB=[2, 1]), False,
     "value_error:list/tuple"),
    ("bfcl_multiple", "multiple_3", call("EuclideanDistance.calculate", pointA=["3", "4"], pointB=[1, 2]), False,
     "type_error:nested"),
    ("bfcl_multiple", "multiple_8", call("realestate.find_properties", location="San Diego, CA", propertyType="Villa",
                                         bedrooms=3, budget={"min": 300000, "max": 400000}), True, ""),
    ("bfcl_multiple", "multiple_8", call("realestate.find_properties", location="San Diego", propertyType="villa",
                                         bedrooms=3, budget={"min": 300000}), False, "value_error:dict_key"),
    ("bfcl_multiple", "multiple_8", call("realestate.find_properties", location="San Diego", propertyType="villa",
                                         bedrooms=3, budget={"min": 1, "max": 400000}), False, "value_error:dict_value"),
    ("bfcl_multiple", "multiple_10", call("database.modify_columns", db_name="employees", table="personal_data",
                                          operation="delete", columns=["SSN", "Email"]), True, ""),
    # parallel: both calls in either order, a missing one, a wrong one
    ("bfcl_parallel", "parallel_0", call("spotify.play", artist="Maroon 5", duration=15)
     + call("spotify.play", artist="Taylor Swift", duration=20), True, ""),
    ("bfcl_parallel", "parallel_0", call("spotify.play", artist="Taylor Swift", duration=20), False,
     "parallel_function_checker_no_order:wrong_count"),
    ("bfcl_parallel", "parallel_0", call("spotify.play", artist="Taylor Swift", duration=20)
     + call("spotify.play", artist="Maroon 5", duration=20), False,
     "parallel_function_checker_no_order:cannot_find_match"),
    ("bfcl_parallel_multiple", "parallel_multiple_0",
     call("math_toolkit.product_of_primes", count=5)
     + call("math_toolkit.sum_of_multiples", lower_limit=1, upper_limit=1000, multiples=[3, 5]), True, ""),
    ("bfcl_parallel_multiple", "parallel_multiple_1",
     call("area_rectangle.calculate", length=7, breadth=3) + call("area_circle.calculate", radius=5), True, ""),
    ("bfcl_parallel_multiple", "parallel_multiple_1",
     call("area_rectangle.calculate", length=7, breadth=3) + call("volume_cylinder.calculate", radius=5, height=1),
     False, "parallel_function_checker_no_order:cannot_find_match"),
    # irrelevance: no call is right; a call, even to an offered function, is wrong
    ("bfcl_irrelevance", "irrelevance_0", "I cannot compute a triangle's area with a BMI calculator.", True, ""),
    ("bfcl_irrelevance", "irrelevance_0", call("determine_body_mass_index", weight=10.0, height=5.0), False,
     "irrelevance_error:decoder_success"),
    ("bfcl_irrelevance", "irrelevance_0", '<tool_call>{"name": oops}</tool_call>', True, ""),
    # live
    ("bfcl_live_simple", "live_simple_0-0-0", call("get_user_info", user_id=7890, special="black"), True, ""),
    ("bfcl_live_simple", "live_simple_0-0-0", call("get_user_info", user_id=7890), False,
     "simple_function_checker:missing_optional"),
    ("bfcl_live_multiple", "live_multiple_1-0-1", call("ChaDri.change_drink", drink_id="1234",
                                                       new_preferences={"sweetness_level": "none", "temperature": "hot"}),
     True, ""),
    ("bfcl_live_irrelevance", "live_irrelevance_0-0-0", "Sorry, none of these tools can do that.", True, ""),
    ("bfcl_live_relevance", "live_relevance_0-0-0", "No call here.", False, "relevance_error:decoder_failed"),
]
