{%- extends 'course_base.tpl' -%}
{%- set page = 'gradebook' -%}
{%- block title -%}
人工评分
{%- endblock -%}
